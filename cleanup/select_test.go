package cleanup_test

import (
	"errors"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/internal/errdefs"
)

func TestSelectorValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  cleanup.Selector
		ok   bool
	}{
		{"empty", cleanup.Selector{}, false},
		{"names", cleanup.Selector{Names: []string{"p"}}, true},
		{"all", cleanup.Selector{All: true}, true},
		{"stale", cleanup.Selector{Stale: true}, true},
		{"stale task older", cleanup.Selector{Stale: true, Task: "t", OlderThan: time.Hour}, true},
		{"task alone", cleanup.Selector{Task: "t"}, false},
		{"older alone", cleanup.Selector{OlderThan: time.Hour}, false},
		{"names and all", cleanup.Selector{Names: []string{"p"}, All: true}, false},
		{"names and task", cleanup.Selector{Names: []string{"p"}, Task: "t"}, false},
		{"negative age", cleanup.Selector{All: true, OlderThan: -time.Second}, false},
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
	project := func(task string, status cleanup.Status, created time.Time) cleanup.Project {
		return cleanup.Project{Name: "p", Task: task, Status: status, Stale: status == cleanup.StatusStale, Created: created}
	}
	for _, tc := range []struct {
		name string
		sel  cleanup.Selector
		p    cleanup.Project
		want bool
	}{
		{"all takes live", cleanup.Selector{All: true}, project("t", cleanup.StatusAlive, now), true},
		{"all takes detached", cleanup.Selector{All: true}, project("t", cleanup.StatusDetached, now), true},
		{"stale takes stale", cleanup.Selector{Stale: true}, project("t", cleanup.StatusStale, now), true},
		{"stale skips live", cleanup.Selector{Stale: true}, project("t", cleanup.StatusAlive, now), false},
		{"stale skips detached", cleanup.Selector{Stale: true}, project("t", cleanup.StatusDetached, now), false},
		{"stale skips other host", cleanup.Selector{Stale: true}, project("t", cleanup.StatusUnknown, now), false},
		{"task matches", cleanup.Selector{All: true, Task: "t"}, project("t", cleanup.StatusAlive, now), true},
		{"task differs", cleanup.Selector{All: true, Task: "u"}, project("t", cleanup.StatusAlive, now), false},
		{"older than: old", cleanup.Selector{Stale: true, OlderThan: time.Hour}, project("t", cleanup.StatusStale, old), true},
		{"older than: new", cleanup.Selector{Stale: true, OlderThan: time.Hour}, project("t", cleanup.StatusStale, now), false},
		{"older than: unknown age", cleanup.Selector{All: true, OlderThan: time.Hour}, project("t", cleanup.StatusAlive, time.Time{}), false},
		{"no base selector", cleanup.Selector{Task: "t"}, project("t", cleanup.StatusStale, now), false},
	} {
		if got := tc.sel.Match(tc.p, now); got != tc.want {
			t.Errorf("%s: Match = %t, want %t", tc.name, got, tc.want)
		}
	}
}
