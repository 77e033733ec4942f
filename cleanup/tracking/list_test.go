package tracking_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

func TestListStatuses(t *testing.T) {
	c := testutil.Docker(t)
	task := unique("status")
	dead := startOwner(t)
	live := fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner(), Containers: 1})
	stale := fakeProject(t, c, fakeSpec{Task: task, Owner: dead.label, Containers: 1, Volume: true})
	detached := fakeProject(t, c, fakeSpec{Task: task, Owner: dead.label})
	if err := tracking.MarkDetached(t.Context(), c, detached, task, "s"); err != nil {
		t.Fatal(err)
	}
	remote := fakeProject(t, c, fakeSpec{Task: task, Owner: "elsewhere.example:42:42"})
	dead.kill()

	for _, tc := range []struct {
		project string
		status  backend.OwnerStatus
		owner   string
		ctrs    int
		vols    int
	}{
		{live, backend.StatusAlive, labels.SelfOwner(), 1, 0},
		{stale, backend.StatusStale, dead.label, 1, 1},
		{detached, backend.StatusDetached, labels.OwnerDetached, 0, 0}, // the marker is not a volume of the project
		{remote, backend.StatusUnknown, "elsewhere.example:42:42", 0, 0},
	} {
		p, ok := find(t, c, tc.project)
		switch {
		case !ok:
			t.Errorf("%s not listed", tc.project)
		case p.Status != tc.status || p.Stale != (tc.status == backend.StatusStale) || p.Owner != tc.owner:
			t.Errorf("%s: status %s, stale %t, owner %q; want %s, owner %q", tc.project, p.Status, p.Stale, p.Owner, tc.status, tc.owner)
		case p.Task != task || p.Containers != tc.ctrs || p.Networks != 1 || p.Volumes != tc.vols:
			t.Errorf("%s: %+v; want task %s, %d containers, 1 network, %d volumes", tc.project, p, task, tc.ctrs, tc.vols)
		case time.Since(p.Created) > time.Minute || p.Sample == "":
			t.Errorf("%s: created %s, sample %q", tc.project, p.Created, p.Sample)
		}
	}
}

func TestNetworkOnlyProjectIsListedAndRemoved(t *testing.T) {
	c := testutil.Docker(t)
	project := fakeProject(t, c, fakeSpec{Task: unique("netonly"), Owner: labels.SelfOwner(), Containers: 2})
	// Delete the containers by hand, as a user might: only the network is left.
	ctrs, err := c.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", projectLabel(project)))})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ctrs {
		if err := c.ContainerRemove(t.Context(), x.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	p, ok := find(t, c, project)
	if !ok || p.Containers != 0 || p.Networks != 1 {
		t.Fatalf("listed %t, %+v; want 0 containers and 1 network", ok, p)
	}
	res, err := tracking.Sweep(t.Context(), c, backend.Selector{Names: []string{project}}, cleanup.RemoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Removed.Networks != 1 {
		t.Errorf("results %+v, want the network removed", res)
	}
	if n := testutil.Resources(t, c, projectLabel(project)); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestRemoveSelections(t *testing.T) {
	c := testutil.Docker(t)
	task, other := unique("sel"), unique("sel-other")
	dead := startOwner(t)
	live := fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner(), Containers: 1})
	stale := fakeProject(t, c, fakeSpec{Task: task, Owner: dead.label, Containers: 2, Volume: true})
	detached := fakeProject(t, c, fakeSpec{Task: task, Owner: dead.label, Containers: 1})
	if err := tracking.MarkDetached(t.Context(), c, detached, task, "s"); err != nil {
		t.Fatal(err)
	}
	otherStale := fakeProject(t, c, fakeSpec{Task: other, Owner: dead.label})
	dead.kill()

	// Dry run: a plan removes nothing.
	plan, err := tracking.Plan(t.Context(), c, backend.Selector{Stale: true, Task: task})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(plan); !slices.Equal(got, []string{stale}) {
		t.Fatalf("plan %v, want only %s", got, stale)
	}
	if n := testutil.Resources(t, c, projectLabel(stale)); n != 4 {
		t.Fatalf("planning removed something: %d resources left of 4", n)
	}

	res, err := tracking.Sweep(t.Context(), c, backend.Selector{Stale: true, Task: task}, cleanup.RemoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != stale || res[0].Removed != (cleanup.Removed{Containers: 2, Networks: 1, Volumes: 1}) {
		t.Fatalf("results %+v", res)
	}
	for _, p := range []string{live, detached, otherStale} {
		if testutil.Resources(t, c, projectLabel(p)) == 0 {
			t.Errorf("%s was removed by a stale cleanup of another project", p)
		}
	}
	// Twice is a no-op.
	res, err = tracking.Sweep(t.Context(), c, backend.Selector{Stale: true, Task: task}, cleanup.RemoveOptions{})
	if err != nil || len(res) != 0 {
		t.Errorf("second stale cleanup: %+v, %v", res, err)
	}

	// A container's name selects its project.
	ctrs, err := c.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", projectLabel(detached)))})
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("containers of %s: %v, %v", detached, ctrs, err)
	}
	res, err = tracking.Sweep(t.Context(), c, backend.Selector{Names: []string{ctrs[0].Names[0][1:]}}, cleanup.RemoveOptions{})
	if err != nil || len(res) != 1 || res[0].Name != detached || res[0].Status != backend.StatusDetached {
		t.Fatalf("cleanup by container name: %+v, %v", res, err)
	}
	if n := testutil.Resources(t, c, projectLabel(detached)); n != 0 {
		t.Errorf("%d resources of %s left (the detach marker?)", n, detached)
	}
	// Gone names are a no-op; a container that is not composebox's is an error.
	res, err = tracking.Sweep(t.Context(), c, backend.Selector{Names: []string{ctrs[0].Names[0][1:], detached, "cbxt-no-such-project"}}, cleanup.RemoveOptions{})
	if err != nil || len(res) != 0 {
		t.Errorf("cleanup of gone names: %+v, %v", res, err)
	}
	plain := startPlainContainer(t)
	if _, err := tracking.Plan(t.Context(), c, backend.Selector{Names: []string{plain}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("plan of a container that is not composebox's: %v, want ErrNotFound", err)
	}

	// All of a task takes the live one too, not the other task's.
	res, err = tracking.Sweep(t.Context(), c, backend.Selector{All: true, Task: task}, cleanup.RemoveOptions{})
	if err != nil || len(res) != 1 || res[0].Name != live {
		t.Fatalf("cleanup all of task: %+v, %v", res, err)
	}
	if testutil.Resources(t, c, projectLabel(otherStale)) == 0 {
		t.Error("cleanup of one task removed another task's project")
	}
}

// startPlainContainer creates a container without composebox's project labels.
func startPlainContainer(t *testing.T) string {
	c := testutil.Docker(t)
	name := unique("plain")
	created, err := c.ContainerCreate(context.Background(), &container.Config{Image: testutil.BaseImage(t), Cmd: []string{"true"}}, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.RemoveContainer(t, c, created.ID) })
	return name
}

func TestRemoveManyInParallel(t *testing.T) {
	c := testutil.Docker(t)
	task := unique("many")
	const n = 20
	want := fakeProjects(t, c, n, fakeSpec{Task: task, Owner: labels.SelfOwner(), Containers: 2})
	start := time.Now()
	res, err := tracking.Sweep(t.Context(), c, backend.Selector{All: true, Task: task}, cleanup.RemoveOptions{})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %d two-container projects in %s", len(res), took.Round(time.Millisecond))
	var got []string
	for _, r := range res {
		got = append(got, r.Name)
		if r.Removed.Containers != 2 || r.Removed.Networks != 1 {
			t.Errorf("%s: removed %+v", r.Name, r.Removed)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if left := testutil.Resources(t, c, labels.LabelTask+"="+task); left != 0 {
		t.Errorf("%d resources left", left)
	}
}

func TestRemoveAfterCancelStillFinishes(t *testing.T) {
	c := testutil.Docker(t)
	task := unique("cancel")
	project := fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner(), Containers: 1})
	plan, err := tracking.Plan(t.Context(), c, backend.Selector{All: true, Task: task})
	if err != nil || len(plan) != 1 {
		t.Fatalf("plan %v, %v", names(plan), err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := tracking.RemovePlanned(ctx, c, plan, cleanup.RemoveOptions{})
	if !errors.Is(err, context.Canceled) || len(res) != 1 || res[0].Err == nil {
		t.Errorf("cancelled before start: %+v, %v; want the project skipped with context.Canceled", res, err)
	}
	if testutil.Resources(t, c, projectLabel(project)) == 0 {
		t.Error("a cancelled cleanup started a removal")
	}
}

func TestProjectsOfLeavesDetachedOut(t *testing.T) {
	c := testutil.Docker(t)
	task := unique("of")
	mine := fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner(), Containers: 1})
	handed := fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner()})
	if err := tracking.MarkDetached(t.Context(), c, handed, task, "s"); err != nil {
		t.Fatal(err)
	}
	if err := tracking.MarkDetached(t.Context(), c, handed, task, "s"); err != nil {
		t.Errorf("second MarkDetached: %v", err)
	}
	got, err := tracking.ProjectsOf(t.Context(), c, task, labels.SelfOwner())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{mine}) {
		t.Errorf("ProjectsOf = %v, want only %s (not the detached %s)", got, mine, handed)
	}
}
