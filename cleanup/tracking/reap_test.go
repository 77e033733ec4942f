package tracking_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

func TestReapRemovesOnlyTheDeadOwnersProjects(t *testing.T) {
	c := testutil.Docker(t)
	task := unique("reap")
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

	// A live owner is never swept.
	if _, err := tracking.SweepOwner(t.Context(), c, watched.label, cleanup.RemoveOptions{}); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("sweep of a live owner: %v, want ErrConflict", err)
	}
	type outcome struct {
		res []backend.SweepResult
		err error
	}
	done := make(chan outcome, 1)
	// The doomed sample has a directory of its own (a Terminal-Bench task's logs), which goes
	// with it; the handed-over one keeps its directory.
	state := t.TempDir()
	for _, p := range []string{doomed, handed} {
		if err := os.MkdirAll(filepath.Join(tracking.SampleDir(state, p), "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		res, err := tracking.Reap(context.WithoutCancel(t.Context()), watched.label, tracking.ReapOptions{Interval: 20 * time.Millisecond, Client: c, StateDir: state})
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		t.Fatalf("Reap returned while its owner lives: %+v, %v", o.res, o.err)
	default:
	}
	for _, p := range append(others, doomed) {
		if testutil.Resources(t, c, projectLabel(p)) == 0 {
			t.Fatalf("%s removed while its owner lives", p)
		}
	}

	killed := time.Now()
	watched.kill()
	var o outcome
	select {
	case o = <-done:
	// A hang detector, not a speed goal: the removals it waits for take seconds on an idle
	// machine and far longer on a loaded one.
	case <-time.After(2 * time.Minute):
		t.Fatal("Reap did not return within 2 minutes of its owner's death")
	}
	t.Logf("reaped %d projects %s after the owner's death", len(o.res), time.Since(killed).Round(time.Millisecond))
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
	if _, err := os.Stat(tracking.SampleDir(state, doomed)); !os.IsNotExist(err) {
		t.Errorf("the reaped sample's directory is still there (stat: %v)", err)
	}
	if _, err := os.Stat(tracking.SampleDir(state, handed)); err != nil {
		t.Errorf("the handed-over sample's directory went: %v", err)
	}
}

func TestReapRefusesAnOwnerItCannotWatch(t *testing.T) {
	for _, owner := range []string{"elsewhere.example:1:1", "detached", "garbage"} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := tracking.Reap(ctx, owner, tracking.ReapOptions{})
		cancel()
		if !errors.Is(err, errdefs.ErrInvalidConfig) {
			t.Errorf("Reap(%q) = %v, want ErrInvalidConfig at once", owner, err)
		}
	}
}
