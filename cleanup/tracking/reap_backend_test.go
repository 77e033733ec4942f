package tracking_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The reaper through a backend's own verbs (what a watchdog that rebuilt its owner's backend
// runs) removes exactly the dead owner's projects, detached ones left alone, as the Docker
// client's reaper does.
func TestReapBackendRemovesOnlyTheDeadOwnersProjects(t *testing.T) {
	c := testutil.Docker(t)
	b, err := dockerbackend.New(c, dockerbackend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	task := unique("reapb")
	watched, bystander := startOwner(t), startOwner(t)
	doomed := fakeProject(t, c, fakeSpec{Task: task, Owner: watched.label, Containers: 2, Volume: true})
	doomedNetOnly := fakeProject(t, c, fakeSpec{Task: task, Owner: watched.label})
	handed := fakeProject(t, c, fakeSpec{Task: task, Owner: watched.label, Containers: 1})
	if err := tracking.MarkDetached(t.Context(), c, handed, task, "s"); err != nil {
		t.Fatal(err)
	}
	others := []string{
		fakeProject(t, c, fakeSpec{Task: task, Owner: bystander.label, Containers: 1}),
		fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner(), Containers: 1}),
		handed,
	}
	if _, err := tracking.SweepOwnerOf(t.Context(), b, watched.label, 0); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("sweep of a live owner: %v, want ErrConflict", err)
	}
	type outcome struct {
		res []backend.SweepResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := tracking.ReapBackend(context.WithoutCancel(t.Context()), b, watched.label, tracking.ReapOptions{Interval: 20 * time.Millisecond, StateDir: t.TempDir()})
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		t.Fatalf("ReapBackend returned while its owner lives: %+v, %v", o.res, o.err)
	default:
	}
	watched.kill()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(2 * time.Minute): // a hang detector: removals are slow on a loaded machine
		t.Fatal("ReapBackend did not return within 2 minutes of its owner's death")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	var got []string
	for _, r := range o.res {
		got = append(got, r.Name)
	}
	slices.Sort(got)
	want := []string{doomed, doomedNetOnly}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("reaped %v, want %v", got, want)
	}
	for _, p := range want {
		if n := testutil.Resources(t, c, projectLabel(p)); n != 0 {
			t.Errorf("%d resources of %s left", n, p)
		}
	}
	for _, p := range others {
		if testutil.Resources(t, c, projectLabel(p)) == 0 {
			t.Errorf("%s (another owner's, or detached) was reaped", p)
		}
	}
}
