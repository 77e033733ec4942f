package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// TestNarrowEgress: a request's egress within the server's --egress is taken; beyond it, each
// name is refused naming the serve flag that would allow it.
func TestNarrowEgress(t *testing.T) {
	c := Ceiling{Policy: compose.Policy{Egress: []string{"*.pypi.test", "pkgs.test"}}}
	var refused []string
	beyond := func(_, value, _, flag string) { refused = append(refused, value+" "+flag) }
	var p compose.Policy
	if err := c.narrowEgress([]string{"files.pypi.test", "pkgs.test:443"}, &p, beyond); err != nil || len(refused) != 0 {
		t.Fatalf("within the ceiling: %v %v", err, refused)
	}
	if !slices.Equal(p.Egress, []string{"files.pypi.test", "pkgs.test:443"}) {
		t.Errorf("egress = %v", p.Egress)
	}
	if err := c.narrowEgress([]string{"other.test"}, &p, beyond); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(refused, []string{"other.test --egress other.test"}) {
		t.Errorf("refused = %v", refused)
	}
	if err := c.narrowEgress([]string{"a b"}, &p, beyond); err == nil {
		t.Error("a rule that is not one was taken")
	}
}

// egressFake is the fake backend with egress allowlists: the lists it was set, and a state
// whose ceiling is the task's.
type egressFake struct {
	*fakebackend.Backend
	mu  sync.Mutex
	set [][]string
}

func (f *egressFake) Egress(context.Context, string) (backend.EgressState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := backend.EgressState{Ceiling: []string{"pkgs.test"}}
	if len(f.set) > 0 {
		st.Allow = f.set[len(f.set)-1]
	}
	return st, nil
}

func (f *egressFake) SetEgress(_ context.Context, _ string, allow []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = append(f.set, slices.Clone(allow))
	return nil
}

// TestFakeEgressRoutes: a live sample's egress is its lease's alone, and a list beyond the
// server's --egress is refused naming the flag before the backend is asked; a list within it
// reaches the backend. A backend without egress allowlists refuses the task itself.
func TestFakeEgressRoutes(t *testing.T) {
	f := &egressFake{Backend: fakebackend.New()}
	f.AddImage("fake/app:1", nil)
	ts := startServerWith(t, Options{Ceiling: Ceiling{Policy: compose.Policy{Egress: []string{"pkgs.test"}}}}, orchestrator.WithBackend(f))
	a, b := ts.lease(t), ts.lease(t)
	asA, asB := map[string]string{leaseHeader: a}, map[string]string{leaseHeader: b}
	task := ts.task(t, a, TaskRequest{Name: "fake", ComposeYAML: fakeTask})
	sm := ts.sample(t, a, task.ID, SampleRequest{})
	path := "/v1/samples/" + sm.Project + "/egress"

	ts.do(t, "GET", path, nil, asB).wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "PUT", path, strings.NewReader(`{"allow":[]}`), asB).wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "PUT", path, nil, asA).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "PUT", path, strings.NewReader(`{"allow":["a b"]}`), asA).wantError(t, http.StatusBadRequest, "invalid_config")
	e := ts.do(t, "PUT", path, strings.NewReader(`{"allow":["pkgs.test","other.test:8080"]}`), asA).
		wantError(t, http.StatusUnprocessableEntity, "policy_violation")
	if !strings.Contains(e.Message, "composebox serve --egress other.test:8080") || strings.Contains(e.Message, "--egress pkgs.test") {
		t.Errorf("beyond the ceiling: %s", e.Message)
	}
	var st EgressState
	ts.do(t, "PUT", path, strings.NewReader(`{"allow":["pkgs.test:443"]}`), asA).json(t, &st)
	if !slices.Equal(st.Allow, []string{"pkgs.test:443"}) || !slices.Equal(st.Ceiling, []string{"pkgs.test"}) {
		t.Errorf("PUT within the ceiling answered %+v", st)
	}
	f.mu.Lock()
	set := slices.Clone(f.set)
	f.mu.Unlock()
	if len(set) != 1 || !slices.Equal(set[0], []string{"pkgs.test:443"}) {
		t.Errorf("the backend was set %v, want only the list within the ceiling", set)
	}

	// On a backend that cannot enforce a list, a task with one is refused before any sample.
	plain := fakebackend.New()
	plain.AddImage("fake/app:1", nil)
	ps := startServerWith(t, Options{Ceiling: Ceiling{Policy: compose.Policy{Egress: []string{"pkgs.test"}}}}, orchestrator.WithBackend(plain))
	pl := ps.lease(t)
	ps.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{Name: "fake", ComposeYAML: fakeTask}), map[string]string{leaseHeader: pl}).
		wantError(t, http.StatusNotImplemented, "unsupported")
	if left := plain.Projects(); len(left) > 0 {
		t.Errorf("a refused task left projects: %v", left)
	}
}

// TestEgressDeniedEventJSON: a denial reaches /v1/events whole, under its kind.
func TestEgressDeniedEventJSON(t *testing.T) {
	d := orchestrator.EgressDenial{Time: time.Unix(1, 0), Service: "default", Name: "other.test", Port: 53, Protocol: "dns", Reason: "name not allowed (A query)"}
	b, err := json.Marshal(eventJSON(orchestrator.Event{Kind: orchestrator.EventEgressDenied, Project: "p", Service: "default", Denial: &d}))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kind   string `json:"kind"`
		Denial struct {
			Name     string `json:"name"`
			Protocol string `json:"protocol"`
			Service  string `json:"service"`
		} `json:"denial"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "egress_denied" || got.Denial.Name != "other.test" || got.Denial.Protocol != "dns" || got.Denial.Service != "default" {
		t.Errorf("event = %s", b)
	}
}
