package backend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

func TestSelectorValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sel  backend.Selector
		ok   bool
	}{
		{"empty", backend.Selector{}, false},
		{"names", backend.Selector{Names: []string{"p"}}, true},
		{"all", backend.Selector{All: true}, true},
		{"stale", backend.Selector{Stale: true}, true},
		{"stale task older", backend.Selector{Stale: true, Task: "t", OlderThan: time.Hour}, true},
		{"task alone", backend.Selector{Task: "t"}, false},
		{"older alone", backend.Selector{OlderThan: time.Hour}, false},
		{"names and all", backend.Selector{Names: []string{"p"}, All: true}, false},
		{"names and task", backend.Selector{Names: []string{"p"}, Task: "t"}, false},
		{"negative age", backend.Selector{All: true, OlderThan: -time.Second}, false},
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
	project := func(task string, status backend.OwnerStatus, created time.Time) backend.Project {
		return backend.Project{Name: "p", Task: task, Status: status, Stale: status == backend.StatusStale, Created: created}
	}
	for _, tc := range []struct {
		name string
		sel  backend.Selector
		p    backend.Project
		want bool
	}{
		{"all takes live", backend.Selector{All: true}, project("t", backend.StatusAlive, now), true},
		{"all takes detached", backend.Selector{All: true}, project("t", backend.StatusDetached, now), true},
		{"stale takes stale", backend.Selector{Stale: true}, project("t", backend.StatusStale, now), true},
		{"stale skips live", backend.Selector{Stale: true}, project("t", backend.StatusAlive, now), false},
		{"stale skips detached", backend.Selector{Stale: true}, project("t", backend.StatusDetached, now), false},
		{"stale skips other host", backend.Selector{Stale: true}, project("t", backend.StatusUnknown, now), false},
		{"task matches", backend.Selector{All: true, Task: "t"}, project("t", backend.StatusAlive, now), true},
		{"task differs", backend.Selector{All: true, Task: "u"}, project("t", backend.StatusAlive, now), false},
		{"older than: old", backend.Selector{Stale: true, OlderThan: time.Hour}, project("t", backend.StatusStale, old), true},
		{"older than: new", backend.Selector{Stale: true, OlderThan: time.Hour}, project("t", backend.StatusStale, now), false},
		{"older than: unknown age", backend.Selector{All: true, OlderThan: time.Hour}, project("t", backend.StatusAlive, time.Time{}), false},
		{"no base selector", backend.Selector{Task: "t"}, project("t", backend.StatusStale, now), false},
	} {
		if got := tc.sel.Match(tc.p, now); got != tc.want {
			t.Errorf("%s: Match = %t, want %t", tc.name, got, tc.want)
		}
	}
}
