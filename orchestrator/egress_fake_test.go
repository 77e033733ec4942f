package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// gatewayLog fakes the narrow backend.EgressWatcher over the fake backend: a gateway's log that
// a follow reads from its start, gets denials as the test sends them, and ends when the test
// says (as when the gateway's container is replaced).
type gatewayLog struct {
	*fakebackend.Backend
	denials chan backend.EgressDenial
	end     chan struct{}
	follows chan string // a project each time a follow starts
	ended   chan string // a project each time a follow returns

	mu      sync.Mutex
	log     []backend.EgressDenial
	ceiling []string   // what Egress says the task's --egress was
	set     [][]string // each list SetEgress got
}

// Egress and SetEgress make the fake an egress backend, which a restricted task needs.
func (g *gatewayLog) Egress(context.Context, string) (backend.EgressState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return backend.EgressState{Ceiling: g.ceiling, Denials: append([]backend.EgressDenial{}, g.log...)}, nil
}

func (g *gatewayLog) SetEgress(_ context.Context, _ string, allow []string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.set = append(g.set, allow)
	return nil
}

func (g *gatewayLog) WatchEgress(ctx context.Context, project string, fn func(backend.EgressDenial)) error {
	defer func() { g.ended <- project }()
	g.mu.Lock()
	past := append([]backend.EgressDenial(nil), g.log...)
	g.mu.Unlock()
	for _, d := range past {
		fn(d)
	}
	g.follows <- project
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.end:
			return nil
		case d := <-g.denials:
			g.mu.Lock()
			g.log = append(g.log, d)
			g.mu.Unlock()
			fn(d)
		}
	}
}

// TestFakeEgressDeniedEvents: the gateway's denials of a restricted sample become egress_denied
// events of its task, each once even when the log is followed again from its start; Cleanup
// stops the following before it returns.
func TestFakeEgressDeniedEvents(t *testing.T) {
	f := fakebackend.New()
	f.AddImage(fakeImage, nil)
	g := &gatewayLog{Backend: f, denials: make(chan backend.EgressDenial), end: make(chan struct{}),
		follows: make(chan string, 8), ended: make(chan string, 8)}
	ev := &events{}
	denied := ev.of(orchestrator.EventEgressDenied)
	o, err := orchestrator.New(orchestrator.WithBackend(g), orchestrator.WithStateDir(t.TempDir()), orchestrator.WithObserver(ev.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if left := f.Projects(); len(left) > 0 {
			t.Errorf("projects left behind: %v", left)
		}
	})
	p := compose.DefaultPolicy()
	p.Egress = []string{"pkgs.test"}
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "egress", Policy: &p})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-g.follows; got != s.Project() {
		t.Fatalf("followed %s, want %s", got, s.Project())
	}
	at := time.Now().UTC()
	g.denials <- backend.EgressDenial{Time: at, Service: "default", Name: "other.test", Port: 53, Protocol: "dns", Reason: "name not allowed (A query)"}
	e := <-denied
	if e.Project != s.Project() || e.Service != "default" || e.Denial == nil || e.Denial.Name != "other.test" || !strings.Contains(e.Message, "other.test") {
		t.Fatalf("event = %+v", e)
	}

	// The log ends and is followed again from its start: other.test is not reported twice.
	g.end <- struct{}{}
	<-g.ended
	<-g.follows
	g.denials <- backend.EgressDenial{Time: at.Add(time.Millisecond), Service: "default", Name: "second.test", Port: 443, Protocol: "tls", Reason: "name not allowed"}
	if e := <-denied; e.Denial == nil || e.Denial.Name != "second.test" || !strings.Contains(e.Message, "port 443") {
		t.Fatalf("after the second follow: %+v", e)
	}

	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.ended:
	default:
		t.Fatal("Cleanup returned while the gateway's log was still followed")
	}
	select {
	case e := <-denied:
		t.Fatalf("an event after Cleanup: %+v", e)
	default:
	}
}

// TestFakeUnrestrictedSampleIsNotWatched: a sample without an allowlist has no gateway to
// follow.
func TestFakeUnrestrictedSampleIsNotWatched(t *testing.T) {
	f := fakebackend.New()
	f.AddImage(fakeImage, nil)
	g := &gatewayLog{Backend: f, follows: make(chan string, 8), ended: make(chan string, 8)}
	o, err := orchestrator.New(orchestrator.WithBackend(g), orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "open"})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-g.follows:
		t.Fatalf("followed the gateway log of %s, which has none", p)
	default:
	}
}

// TestFakeEgressNeedsAnEgressBackend: a task with an allowlist on a backend that cannot enforce
// one is refused at TaskInit (its services would otherwise reach the whole internet), with an
// error that says so; the same task without the list starts.
func TestFakeEgressNeedsAnEgressBackend(t *testing.T) {
	f := fakebackend.New()
	f.AddImage(fakeImage, nil)
	o, err := orchestrator.New(orchestrator.WithBackend(f), orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	p := compose.DefaultPolicy()
	p.Egress = []string{"pkgs.test"}
	_, err = o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: "egress-refused", YAML: []byte(fakeTwoServices), Policy: &p})
	var ue *backend.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "egress allowlist") {
		t.Fatalf("TaskInit of a restricted task on a backend without egress = %v, want an UnsupportedError", err)
	}
	if left := f.Projects(); len(left) > 0 {
		t.Errorf("a refused task left projects: %v", left)
	}
}

// TestFakeSetEgressWithinCeiling: a live sample's list stays within the --egress its task
// started with, as the backend records it: a name beyond is a policy violation naming the flag,
// and the backend never gets the list; a name within goes through.
func TestFakeSetEgressWithinCeiling(t *testing.T) {
	f := fakebackend.New()
	f.AddImage(fakeImage, nil)
	g := &gatewayLog{Backend: f, denials: make(chan backend.EgressDenial), end: make(chan struct{}),
		follows: make(chan string, 8), ended: make(chan string, 8), ceiling: []string{"pkgs.test", "*.docs.test:443"}}
	o, err := orchestrator.New(orchestrator.WithBackend(g), orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	p := compose.DefaultPolicy()
	p.Egress = []string{"pkgs.test", "*.docs.test:443"}
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "egress-ceiling", Policy: &p})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	<-g.follows
	for _, beyond := range [][]string{{"other.test"}, {"pkgs.test:8080"}, {"a.docs.test:80"}, {"*.test"}} {
		err := s.SetEgress(t.Context(), beyond...)
		var pe *compose.PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "--egress "+beyond[0]) {
			t.Errorf("SetEgress(%v) = %v, want a policy violation naming --egress %s", beyond, err, beyond[0])
		}
	}
	if err := s.SetEgress(t.Context(), "pkgs.test:443", "api.docs.test:443"); err != nil {
		t.Fatalf("SetEgress within the ceiling: %v", err)
	}
	if err := s.SetEgress(t.Context()); err != nil {
		t.Fatalf("SetEgress closing: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.set) != 2 || len(g.set[0]) != 2 || len(g.set[1]) != 0 {
		t.Errorf("the backend got %v, want only the two lists within the ceiling", g.set)
	}
}
