package backendtest

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

func itoa(n int) string { return strconv.Itoa(n) }

// staleOwner names this process with another start time: the owner label of a process that is
// gone and whose pid was reused, which is stale on every backend that reads owners.
func staleOwner(t *testing.T) string {
	o, err := labels.ParseOwner(labels.SelfOwner())
	if err != nil {
		t.Fatalf("this process's owner label: %v", err)
	}
	o.Start++
	return o.String()
}

// testSelect starts two projects, a live fresh one and a stale old one of another task, and
// selects and sweeps them by every selector, through backend.Plan and backend.Sweep. Only
// read-only selections (Plan, dry runs) may select all projects: the engine may hold others'.
func (e *env) testSelect(t *testing.T) {
	liveName, staleName := e.name("live"), e.name("stale")
	liveTask, staleTask := e.name("ltask"), e.name("stask")
	live := e.project(liveName, meta{task: liveTask}, map[string]types.ServiceConfig{"sel-live": idle()})
	stale := e.project(staleName, meta{task: staleTask, owner: staleOwner(t), created: time.Now().Add(-3 * time.Hour)},
		map[string]types.ServiceConfig{"sel-stale": idle()})
	var wg sync.WaitGroup
	var ok [2]bool
	for i, p := range []*types.Project{live, stale} {
		wg.Go(func() { ok[i] = e.startQuiet(t, p) != nil })
	}
	wg.Wait()
	if !ok[0] || !ok[1] {
		t.FailNow()
	}

	ps, err := e.b.ListProjects(ctx(t))
	if err != nil {
		t.Fatalf("list projects: %v", err)
	}
	lp, ok1 := projectNamed(ps, liveName)
	sp, ok2 := projectNamed(ps, staleName)
	if !ok1 || !ok2 {
		t.Fatalf("list projects: %v of this run, want %s and %s", e.names(ps), liveName, staleName)
	}
	if lp.Task != liveTask || lp.Stale || lp.Status != backend.StatusAlive || lp.Containers != 1 || len(lp.ContainerNames) != 1 {
		t.Errorf("live project listed as %+v, want task %s, alive, one container named", lp, liveTask)
	}
	if sp.Task != staleTask || !sp.Stale || sp.Status != backend.StatusStale || time.Since(sp.Created) < 2*time.Hour {
		t.Errorf("stale project listed as %+v, want task %s, stale, created 3 hours ago", sp, staleTask)
	}
	owned, err := backend.OwnedProjects(ctx(t), e.b, liveTask, labels.SelfOwner())
	if err != nil || !slices.Equal(owned, []string{liveName}) {
		t.Errorf("projects of %s this process owns: %v, %v, want [%s]", liveTask, owned, err, liveName)
	}
	ctrs, err := e.b.Containers(ctx(t), labels.ProjectSelector(liveName), true)
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("containers of %s: %d, %v, want 1", liveName, len(ctrs), err)
	}

	plan := func(sel backend.Selector) []string {
		t.Helper()
		got, err := backend.Plan(ctx(t), e.b, sel)
		if err != nil {
			t.Fatalf("plan %+v: %v", sel, err)
		}
		return e.names(got)
	}
	for _, c := range []struct {
		what string
		sel  backend.Selector
		want []string
	}{
		{"project name", backend.Selector{Names: []string{liveName}}, []string{liveName}},
		{"container name", backend.Selector{Names: []string{sp.ContainerNames[0]}}, []string{staleName}},
		{"container id", backend.Selector{Names: []string{ctrs[0].ID}}, []string{liveName}},
		{"names of both", backend.Selector{Names: []string{staleName, lp.ContainerNames[0], liveName}}, []string{staleName, liveName}},
		{"a name that matches nothing", backend.Selector{Names: []string{e.name("gone")}}, nil},
		{"all of a task", backend.Selector{All: true, Task: liveTask}, []string{liveName}},
		{"stale", backend.Selector{Stale: true}, []string{staleName}},
		{"stale of the live task", backend.Selector{Stale: true, Task: liveTask}, nil},
		{"older than an hour", backend.Selector{All: true, OlderThan: time.Hour}, []string{staleName}},
		{"stale, of a task, older than an hour", backend.Selector{Stale: true, Task: staleTask, OlderThan: time.Hour}, []string{staleName}},
	} {
		if got := plan(c.sel); !slices.Equal(got, c.want) {
			t.Errorf("select by %s: %v, want %v", c.what, got, c.want)
		}
	}
	if all := plan(backend.Selector{All: true}); !slices.Contains(all, liveName) || !slices.Contains(all, staleName) {
		t.Errorf("select all: %v of this run, want both", all)
	}
	if _, err := backend.Plan(ctx(t), e.b, backend.Selector{Names: []string{liveName}, All: true}); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("select by names and all: %v, want ErrInvalidConfig", err)
	}

	// A dry run removes nothing.
	dry, err := backend.Sweep(ctx(t), e.b, backend.Selector{All: true, Task: staleTask}, backend.RemoveOptions{DryRun: true})
	if err != nil || len(dry) != 1 || dry[0].Name != staleName || dry[0].Removed != (backend.Removed{}) {
		t.Errorf("dry run of task %s: %+v, %v, want %s alone, nothing removed", staleTask, dry, err, staleName)
	}
	if left, _ := e.b.Containers(ctx(t), labels.ProjectSelector(staleName), true); len(left) != 1 {
		t.Errorf("a dry run removed %s's container: %d left", staleName, len(left))
	}

	// A sweep by container name removes that project alone, and again is a no-op.
	byName := backend.Selector{Names: []string{sp.ContainerNames[0]}}
	res, err := backend.Sweep(ctx(t), e.b, byName, backend.RemoveOptions{Grace: -1})
	if err != nil || len(res) != 1 || res[0].Name != staleName || res[0].Removed.Containers != 1 {
		t.Errorf("sweep of %s by its container's name: %+v, %v, want its one container removed", staleName, res, err)
	}
	if res, err := backend.Sweep(ctx(t), e.b, byName, backend.RemoveOptions{Grace: -1}); err != nil || len(res) != 0 {
		t.Errorf("second sweep by the same name: %+v, %v, want nothing selected and no error", res, err)
	}
	// A sweep of the live task removes the live project.
	res, err = backend.Sweep(ctx(t), e.b, backend.Selector{All: true, Task: liveTask}, backend.RemoveOptions{Grace: -1})
	if err != nil || len(res) != 1 || res[0].Name != liveName || res[0].Removed.Containers != 1 {
		t.Errorf("sweep of task %s: %+v, %v, want %s's one container removed", liveTask, res, err, liveName)
	}
	ps, err = e.b.ListProjects(ctx(t))
	for _, n := range []string{liveName, staleName} {
		if _, ok := projectNamed(ps, n); ok || err != nil {
			t.Errorf("%s still listed after its sweep (%v)", n, err)
		}
	}
}

// startQuiet is start from another goroutine: it reports a failure with Errorf and returns
// nil, since only the test's goroutine may end it.
func (e *env) startQuiet(t *testing.T, p *types.Project) []backend.ServiceState {
	if err := e.up(t, t, p); err != nil {
		t.Errorf("up %s: %v", p.Name, err)
		return nil
	}
	states, err := e.b.Wait(ctx(t), p, backend.WaitOptions{})
	if err != nil {
		t.Errorf("wait for %s: %v", p.Name, err)
		return nil
	}
	return states
}
