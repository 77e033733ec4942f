package orchestrator_test

import (
	"context"
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

	mu  sync.Mutex
	log []backend.EgressDenial
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
