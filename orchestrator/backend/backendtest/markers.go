package backendtest

import (
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// claimers is how many goroutines race for one warm sample.
const claimers = 8

// testClaims marks a sample warm and has claimers goroutines claim it at once: exactly one
// gets it, the pool no longer lists it, and a later Take finds nothing to take.
func (e *env) testClaims(t *testing.T) {
	m, ok := e.b.(markers)
	if !ok {
		t.Skipf("backend %s keeps no warm samples (no MarkWarm, Claim, Take, WarmProjects): nothing to claim", e.b.Kind())
	}
	name, task := e.name("claim"), e.name("ctask")
	p := e.project(name, meta{task: task}, map[string]types.ServiceConfig{"pooled": idle()})
	e.start(t, t, p)

	marker := backend.Marker{Project: name, Task: task, Sample: name, Owner: labels.SelfOwner()}
	if err := m.MarkWarm(ctx(t), backend.WarmMarker{Marker: marker, Fingerprint: "backendtest", Shared: true}); err != nil {
		t.Fatalf("mark %s warm: %v", name, err)
	}
	warm, err := m.WarmProjects(ctx(t), task)
	if err != nil || len(warm) != 1 || warm[0].Project != name || warm[0].Fingerprint != "backendtest" || !warm[0].Shared {
		t.Fatalf("warm projects of %s: %+v, %v, want %s alone, shared, with its fingerprint", task, warm, err, name)
	}

	var wg sync.WaitGroup
	won := make([]bool, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	for i := range claimers {
		wg.Go(func() {
			<-start
			won[i], errs[i] = m.Claim(ctx(t), marker)
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range claimers {
		if errs[i] != nil {
			t.Errorf("claim %d: %v", i, errs[i])
		}
		if won[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d of %d claimers took %s, want exactly one", winners, claimers, name)
	}
	if warm, err := m.WarmProjects(ctx(t), task); err != nil || len(warm) != 0 {
		t.Errorf("warm projects of %s after the claim: %+v, %v, want none", task, warm, err)
	}
	if took, err := m.Take(ctx(t), name); took || err != nil {
		t.Errorf("take of a claimed sample: %v, %v, want false", took, err)
	}
	ps, err := e.b.ListProjects(ctx(t))
	if lp, ok := projectNamed(ps, name); !ok || err != nil || lp.Pool != labels.PoolClaimed {
		t.Errorf("claimed project listed as %+v (listed %v, %v), want pool %q", lp, ok, err, labels.PoolClaimed)
	}
}
