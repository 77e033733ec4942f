package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// waitPool polls the task's pool until cond holds, failing the test after a minute.
func waitPool(t *testing.T, task *orchestrator.Task, what string, cond func(orchestrator.PoolStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		st := task.PoolStatus()
		if cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool of %s: %s not reached within a minute: %+v", task.Name(), what, st)
		}
		<-tick.C
	}
}

// waitListed polls `ls` for the projects of task until cond holds, failing the test after a
// minute: a take from a pool that is not shared records itself after SampleInit returned.
func waitListed(t *testing.T, task, what string, cond func(map[string]backend.Project) bool) map[string]backend.Project {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got := listed(t, task)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls of %s: %s not seen within a minute: %+v", task, what, got)
		}
		<-tick.C
	}
}

func full(n int) func(orchestrator.PoolStatus) bool {
	return func(st orchestrator.PoolStatus) bool { return st.Ready == n && st.Filling == 0 }
}

// listed returns the projects of task as `ls` sees them.
func listed(t *testing.T, task string) map[string]backend.Project {
	t.Helper()
	all, err := tracking.List(t.Context(), testutil.Docker(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]backend.Project{}
	for _, p := range all {
		if p.Task == task {
			out[p.Name] = p
		}
	}
	return out
}

func TestPoolTakeGivesWorkingSampleAndRefills(t *testing.T) {
	o, rec := newOrchestrator(t)
	name := uniqueTask("pool")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(twoServices), Warm: 2})
	waitPool(t, task, "2 ready", full(2))

	// Every pooled sample shows as warm.
	got := listed(t, name)
	if len(got) != 2 {
		t.Fatalf("ls: %d projects of the task, want the 2 warm ones: %+v", len(got), got)
	}
	for _, p := range got {
		if p.Pool != labels.PoolWarm || p.Status != backend.StatusAlive {
			t.Errorf("ls: %s pool %q status %s, want warm and alive", p.Name, p.Pool, p.Status)
		}
	}

	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: "mine-1"})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if rec.count(orchestrator.EventPoolTaken) != 1 {
		t.Fatalf("pool_taken events: %d, want 1 (the sample was not taken from the pool)", rec.count(orchestrator.EventPoolTaken))
	}
	if _, ok := got[s.Project()]; !ok {
		t.Fatalf("took %s, not one of the warm samples %v", s.Project(), got)
	}
	if s.ID() != "mine-1" || len(s.Sandboxes()) != 2 || s.Default().Service() != "default" {
		t.Fatalf("taken sample: id %q, %d sandboxes, default %s", s.ID(), len(s.Sandboxes()), s.Default().Service())
	}
	r, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"echo", "hi"}})
	if err != nil || string(r.Stdout) != "hi\n" {
		t.Fatalf("exec in the taken sample: %v %+v", err, r)
	}
	peer, err := s.Sandbox("peer")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := peer.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec in the peer: %v %+v", err, r)
	}
	// The id is recorded for other processes, and the sample is no longer warm.
	waitListed(t, name, "the taken sample as mine-1, claimed", func(got map[string]backend.Project) bool {
		p := got[s.Project()]
		return p.Sample == "mine-1" && p.Pool == labels.PoolClaimed
	})

	// The pool refills to 2, without the taken one.
	waitPool(t, task, "refilled to 2", full(2))
	warm := 0
	for _, p := range listed(t, name) {
		if p.Pool == labels.PoolWarm {
			warm++
		}
	}
	if warm != 2 {
		t.Fatalf("after the refill, %d warm projects, want 2", warm)
	}
}

func TestPoolRacingSampleInitsClaimEachSampleOnce(t *testing.T) {
	o, rec := newOrchestrator(t)
	name := uniqueTask("race")
	c := testutil.Docker(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive), Warm: 4})
	waitPool(t, task, "4 ready", full(4))

	const n = 20
	samples := make([]*orchestrator.Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			samples[i], errs[i] = task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: fmt.Sprint("racer-", i)})
		})
	}
	wg.Wait()
	for _, s := range samples {
		if s != nil {
			t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
		}
	}
	byProject := map[string]string{}
	for i, s := range samples {
		if errs[i] != nil {
			t.Fatalf("sample %d: %v", i, errs[i])
		}
		if prev, dup := byProject[s.Project()]; dup {
			t.Fatalf("%s given to both %s and racer-%d", s.Project(), prev, i)
		}
		byProject[s.Project()] = s.ID()
	}
	if taken := rec.count(orchestrator.EventPoolTaken); taken < 1 || taken > 4+n {
		t.Fatalf("pool_taken: %d", taken)
	}
	// Each claim marker names the one SampleInit that holds the sample.
	waitListed(t, name, "every sample recorded with the id of its holder", func(got map[string]backend.Project) bool {
		for project, id := range byProject {
			if got[project].Sample != id {
				return false
			}
		}
		return true
	})

	// The daemon-level claim is atomic across processes too: 20 claimers racing over 4 warm
	// markers, each trying every marker in turn, win each marker exactly once.
	task2 := uniqueTask("markers")
	removeTaskProjects(t, c, task2)
	var projects []string
	for i := range 4 {
		project := fmt.Sprintf("cbx-%s-m%d", task2, i)
		projects = append(projects, project)
		if err := tracking.MarkWarm(t.Context(), c, project, task2, "m", labels.SelfOwner(), "fp", true); err != nil {
			t.Fatal(err)
		}
	}
	wins := make([]int, len(projects))
	var mu sync.Mutex
	for i := range n {
		wg.Go(func() {
			for j, p := range projects {
				won, err := tracking.Claim(t.Context(), c, p, task2, fmt.Sprint("claimer-", i), labels.SelfOwner())
				if err != nil {
					t.Errorf("claim %s: %v", p, err)
				}
				if won {
					mu.Lock()
					wins[j]++
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	for j, w := range wins {
		if w != 1 {
			t.Errorf("marker %s claimed %d times, want once", projects[j], w)
		}
	}
	if n, err := testutil.Count(t.Context(), c, filters.Arg("label", labels.LabelPool+"="+labels.PoolWarm), filters.Arg("label", labels.LabelTask+"="+task2)); err != nil || n != 0 {
		t.Errorf("%d warm markers left after every claim (%v)", n, err)
	}
}

// metadataProject gives each sample its own environment from its metadata.
const metadataProject = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    environment:
      FLAG: ${SAMPLE_METADATA_FLAG:-none}
`

func TestPoolRefusesMetadataProject(t *testing.T) {
	o, rec := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("meta"), YAML: []byte(metadataProject), Warm: 2})
	st := task.PoolStatus()
	if st.Poolable || st.Target != 0 || st.Reason == "" {
		t.Fatalf("pool status of a metadata project: %+v, want not poolable with a reason", st)
	}
	var reason string
	for _, e := range rec.snapshot() {
		if e.Kind == orchestrator.EventPoolRefused {
			reason = e.Message
		}
	}
	if reason == "" || reason != st.Reason {
		t.Fatalf("pool_refused event message %q, want the status's reason %q", reason, st.Reason)
	}
	if want := "SAMPLE_METADATA_FLAG"; !strings.Contains(reason, want) {
		t.Errorf("reason %q does not name %s", reason, want)
	}
	err := task.Prewarm(t.Context(), 1)
	if !errors.Is(err, cbxerr.ErrInvalidConfig) {
		t.Fatalf("Prewarm of a metadata project: %v, want ErrInvalidConfig", err)
	}
}

func TestTaskCleanupRemovesWarmSamples(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := testutil.Docker(t)
	name := uniqueTask("poolclean")
	removeTaskProjects(t, c, name)
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, YAML: []byte(twoServices)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	if err := task.Prewarm(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	// Clean up while refills may still run, then again once some are warm.
	waitPool(t, task, "one ready", func(st orchestrator.PoolStatus) bool { return st.Ready >= 1 })
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.Resources(t, c, labels.LabelTask+"="+name); n != 0 {
		t.Fatalf("%d resources of the pooled task left after Task.Cleanup", n)
	}
	if _, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{}); err == nil {
		t.Fatal("SampleInit after Task.Cleanup succeeded")
	}
}

func TestPoolDropsASampleThatDiedWhileWaiting(t *testing.T) {
	o, rec := newOrchestrator(t)
	c := testutil.Docker(t)
	name := uniqueTask("died")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive), Warm: 1})
	waitPool(t, task, "1 ready", full(1))
	var victim string
	for p := range listed(t, name) {
		victim = p
	}
	// Its container dies behind the pool's back.
	list, err := c.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.ComposeProjectLabel+"="+victim))})
	if err != nil || len(list) != 1 {
		t.Fatalf("containers of %s: %d (%v)", victim, len(list), err)
	}
	if err := c.ContainerKill(t.Context(), list[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	// The engine's event stream, not a take, tells the pool: it drops the dead sample and
	// starts another before anyone asks.
	waitPool(t, task, "refilled after the death", func(st orchestrator.PoolStatus) bool {
		return st.Ready == 1 && rec.count(orchestrator.EventPoolWarm) == 2
	})
	waitListed(t, name, "the dead sample removed", func(got map[string]backend.Project) bool {
		_, still := got[victim]
		return !still
	})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Project() == victim || rec.count(orchestrator.EventPoolTaken) != 1 {
		t.Fatalf("took %s (the dead one is %s), pool_taken %d", s.Project(), victim, rec.count(orchestrator.EventPoolTaken))
	}
	if r, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec in the sample taken after the death: %v %+v", err, r)
	}
}

func TestSampleInitTakesARefillInFlight(t *testing.T) {
	// One start slot, held by the refill: a SampleInit that finds the pool empty waits for it.
	o, rec := newOrchestrator(t, orchestrator.WithLimits(orchestrator.Limits{Starts: 1}))
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("adopt"), YAML: []byte(twoServices), Warm: 1})
	waitPool(t, task, "a refill in flight", func(st orchestrator.PoolStatus) bool { return st.Filling == 1 })
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: "adopter"})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	// It took the refill when it came up, rather than start a sample of its own after it.
	var warm string
	for _, e := range rec.snapshot() {
		if e.Kind == orchestrator.EventPoolWarm && warm == "" {
			warm = e.Project
		}
	}
	if rec.count(orchestrator.EventPoolTaken) != 1 || s.Project() != warm {
		t.Fatalf("SampleInit got %s; the refill in flight was %q; pool_taken %d, want the refill taken",
			s.Project(), warm, rec.count(orchestrator.EventPoolTaken))
	}
	if s.ID() != "adopter" {
		t.Fatalf("id %q, want adopter", s.ID())
	}
}

func TestCloseEndsThePoolAndRemovesItsWaitingSamples(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := testutil.Docker(t)
	name := uniqueTask("closepool")
	removeTaskProjects(t, c, name)
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive), Warm: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitPool(t, task, "2 ready", full(2))
	// The caller forgets Task.Cleanup: Close still ends the refills and removes what the pool
	// held, which nobody could take any more.
	if err := o.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := testutil.Resources(t, c, labels.LabelTask+"="+name); n != 0 {
		t.Fatalf("%d resources of the pool left after Close", n)
	}
	if st := task.PoolStatus(); st.Ready != 0 || st.Filling != 0 {
		t.Fatalf("pool after Close: %+v", st)
	}
}

func (r *recorder) snapshot() []orchestrator.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]orchestrator.Event(nil), r.events...)
}
