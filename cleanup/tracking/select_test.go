package tracking_test

import (
	"errors"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
)

func TestSelectorValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  tracking.Selector
		ok   bool
	}{
		{"empty", tracking.Selector{}, false},
		{"names", tracking.Selector{Names: []string{"p"}}, true},
		{"all", tracking.Selector{All: true}, true},
		{"stale", tracking.Selector{Stale: true}, true},
		{"stale task older", tracking.Selector{Stale: true, Task: "t", OlderThan: time.Hour}, true},
		{"task alone", tracking.Selector{Task: "t"}, false},
		{"older alone", tracking.Selector{OlderThan: time.Hour}, false},
		{"names and all", tracking.Selector{Names: []string{"p"}, All: true}, false},
		{"names and task", tracking.Selector{Names: []string{"p"}, Task: "t"}, false},
		{"negative age", tracking.Selector{All: true, OlderThan: -time.Second}, false},
	} {
		err := tc.sel.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%t", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidConfig) {
			t.Errorf("%s: %v is not ErrInvalidConfig", tc.name, err)
		}
	}
}

func TestSelectorMatch(t *testing.T) {
	now := time.Now()
	old := now.Add(-2 * time.Hour)
	project := func(task string, status tracking.Status, created time.Time) tracking.Project {
		return tracking.Project{Name: "p", Task: task, Status: status, Stale: status == tracking.StatusStale, Created: created}
	}
	for _, tc := range []struct {
		name string
		sel  tracking.Selector
		p    tracking.Project
		want bool
	}{
		{"all takes live", tracking.Selector{All: true}, project("t", tracking.StatusAlive, now), true},
		{"all takes detached", tracking.Selector{All: true}, project("t", tracking.StatusDetached, now), true},
		{"stale takes stale", tracking.Selector{Stale: true}, project("t", tracking.StatusStale, now), true},
		{"stale skips live", tracking.Selector{Stale: true}, project("t", tracking.StatusAlive, now), false},
		{"stale skips detached", tracking.Selector{Stale: true}, project("t", tracking.StatusDetached, now), false},
		{"stale skips other host", tracking.Selector{Stale: true}, project("t", tracking.StatusUnknown, now), false},
		{"task matches", tracking.Selector{All: true, Task: "t"}, project("t", tracking.StatusAlive, now), true},
		{"task differs", tracking.Selector{All: true, Task: "u"}, project("t", tracking.StatusAlive, now), false},
		{"older than: old", tracking.Selector{Stale: true, OlderThan: time.Hour}, project("t", tracking.StatusStale, old), true},
		{"older than: new", tracking.Selector{Stale: true, OlderThan: time.Hour}, project("t", tracking.StatusStale, now), false},
		{"older than: unknown age", tracking.Selector{All: true, OlderThan: time.Hour}, project("t", tracking.StatusAlive, time.Time{}), false},
		{"no base selector", tracking.Selector{Task: "t"}, project("t", tracking.StatusStale, now), false},
	} {
		if got := tc.sel.Match(tc.p, now); got != tc.want {
			t.Errorf("%s: Match = %t, want %t", tc.name, got, tc.want)
		}
	}
}
