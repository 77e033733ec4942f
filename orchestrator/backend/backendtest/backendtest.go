// Package backendtest is the behaviour every backend owes the orchestrator, as one test
// harness: up with healthchecks and one-shot dependencies, the typed not-ready error, an
// idempotent down, selection and sweep through backend.Plan and backend.Sweep, claims taken
// exactly once, the death watch, and the exec and file operations. A backend's own package
// tests call Run; passing it is what "the backend works" means.
//
// The harness speaks to the backend through orchestrator/backend alone. What a backend may or
// may not offer (markers, placement over several engines) is found by type assertion on
// interfaces of this package, so that a backend without it skips those cases and says why.
//
// Every project the harness starts carries composebox's labels (cleanup/labels) under the
// harness's task names and is removed by a cleanup registered before anything is asserted.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The services of the harness's projects, by role. A backend that cannot run commands (the
// fake) is told by these names which services exit and how.
const (
	// ServiceWeb runs until removed and has a healthcheck.
	ServiceWeb = "web"
	// ServiceOneShot exits 0 at once; ServiceWeb waits for it to have done so.
	ServiceOneShot = "oneshot"
	// ServiceFailing prints FailingOutput and exits FailingExitCode at once; a service of the
	// not-ready project waits for it to succeed, which it never does.
	ServiceFailing = "failing"
	// ServiceVictim runs until the death watch's case makes it exit (Harness.Kill).
	ServiceVictim = "victim"
)

// FailingExitCode and FailingOutput are ServiceFailing's exit code and output.
const (
	FailingExitCode = 3
	FailingOutput   = "backendtest: failing on purpose"
)

// callTimeout bounds each call the harness makes, so that a hang fails its case instead of
// the whole run.
const callTimeout = 3 * time.Minute

// Harness is a backend under test.
type Harness struct {
	// New returns the backend, once per Run, its closing registered with t.Cleanup.
	New func(t *testing.T) backend.Backend
	// Prefix starts the name of every project and task the harness makes ("cbxbt-docker"):
	// lower-case letters, digits and dashes, short enough that a project name stays under 40
	// characters.
	Prefix string
	// Kill makes a running container exit, for the death watch. Nil: the harness makes the
	// victim service exit from inside (an exec writes to the fifo its main process reads).
	Kill func(t *testing.T, b backend.Backend, s backend.ServiceState)
}

// placer is a backend of several engines, which must be told where a sample goes before Up.
type placer interface {
	Place(ctx context.Context, req backend.PlaceRequest) (backend.Placement, error)
}

// markers is a backend that records warm samples and claims them.
type markers interface {
	MarkWarm(ctx context.Context, m backend.WarmMarker) error
	Claim(ctx context.Context, m backend.Marker) (bool, error)
	Take(ctx context.Context, project string) (bool, error)
	WarmProjects(ctx context.Context, task string) ([]backend.WarmProject, error)
}

// env is what every case of one run shares.
type env struct {
	h     Harness
	b     backend.Backend
	image string
	run   string // this run's random part of names
}

// Run runs the whole harness on h's backend. Cases that need their own projects run in
// parallel; the exec, file and death cases share one project.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Prefix == "" {
		t.Fatal("backendtest: a harness needs New and Prefix")
	}
	b := h.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	image, err := b.BaseImage(ctx)
	if err != nil {
		t.Fatalf("base image: %v", err)
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	e := &env{h: h, b: b, image: image, run: hex.EncodeToString(rnd[:])}

	var shared *started
	run := t // the shared project lives as long as the run
	t.Run("up", func(t *testing.T) { shared = e.testUp(t, run) })
	t.Run("sandbox", func(t *testing.T) {
		if shared == nil {
			t.Skip("the shared project did not come up")
		}
		e.testSandboxes(t, shared)
	})
	t.Run("deaths", func(t *testing.T) {
		if shared == nil {
			t.Skip("the shared project did not come up")
		}
		e.testDeaths(t, shared)
	})
	t.Run("not-ready", func(t *testing.T) { t.Parallel(); e.testNotReady(t) })
	t.Run("down", func(t *testing.T) { t.Parallel(); e.testDown(t) })
	t.Run("select", func(t *testing.T) { t.Parallel(); e.testSelect(t) })
	t.Run("claims", func(t *testing.T) { t.Parallel(); e.testClaims(t) })
}

// ctx is a context for one call of t's case.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// meta is what a project's labels say of it.
type meta struct {
	task, sample, owner string
	created             time.Time
}

// name is a project (or task) name of this run for role.
func (e *env) name(role string) string { return e.h.Prefix + "-" + role + "-" + e.run }

// project is a normalised project named name of the given services, each running the base
// image and labelled as the orchestrator labels a sample's, under m.
func (e *env) project(name string, m meta, svcs map[string]types.ServiceConfig) *types.Project {
	if m.owner == "" {
		m.owner = labels.SelfOwner()
	}
	if m.created.IsZero() {
		m.created = time.Now()
	}
	if m.sample == "" {
		m.sample = name
	}
	ours := func() types.Labels {
		return types.Labels{
			labels.LabelManaged: "true",
			labels.LabelTask:    m.task,
			labels.LabelSample:  m.sample,
			labels.LabelOwner:   m.owner,
			labels.LabelCreated: m.created.UTC().Format(time.RFC3339),
		}
	}
	wd := os.TempDir()
	p := &types.Project{Name: name, WorkingDir: wd, Services: types.Services{},
		Networks: types.Networks{"default": {Name: name + "_default", Labels: ours()}}}
	init := true
	grace := types.Duration(time.Second)
	for n, s := range svcs {
		s.Name = n
		s.Image = e.image
		s.Init = &init
		s.StopGracePeriod = &grace
		s.Labels = ours()
		s.CustomLabels = types.Labels{
			labels.ComposeProjectLabel: name, labels.ComposeServiceLabel: n,
			labels.ComposeVersionLabel: labels.ComposeVersion, labels.ComposeOneoffLabel: "False",
			labels.ComposeWorkingDirLabel: wd, labels.ComposeConfigFilesLabel: "",
		}
		s.Networks = map[string]*types.ServiceNetworkConfig{"default": nil}
		p.Services[n] = s
	}
	return p
}

// idle is a service that runs until removed.
func idle() types.ServiceConfig {
	return types.ServiceConfig{Command: types.ShellCommand{"tail", "-f", "/dev/null"}}
}

// up places (on a backend of several engines) and starts p, its removal registered first on
// owner (the test whose end removes it: t, or a parent sharing the project with its
// subtests). It returns Up's error.
func (e *env) up(t, owner *testing.T, p *types.Project) error {
	t.Helper()
	owner.Cleanup(func() { e.down(owner, p.Name) })
	if pl, ok := e.b.(placer); ok {
		where, err := pl.Place(ctx(t), backend.PlaceRequest{Project: p, Task: p.Services[firstService(p)].Labels[labels.LabelTask]})
		if err != nil {
			return fmt.Errorf("place %s: %w", p.Name, err)
		}
		t.Logf("project %s placed on engine %s (%s)", p.Name, where.Engine, where.Reason)
	}
	return e.b.Up(ctx(t), p, backend.UpOptions{})
}

// down removes a project at the end of a case, on a context of its own: the case's may be done.
func (e *env) down(t *testing.T, project string) {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := e.b.Down(c, project, backend.DownOptions{Grace: -1}); err != nil {
		t.Errorf("remove project %s: %v", project, err)
	}
}

// start is up then Wait, failing the case on either error.
func (e *env) start(t, owner *testing.T, p *types.Project) []backend.ServiceState {
	t.Helper()
	if err := e.up(t, owner, p); err != nil {
		t.Fatalf("up %s: %v", p.Name, err)
	}
	states, err := e.b.Wait(ctx(t), p, backend.WaitOptions{})
	if err != nil {
		t.Fatalf("wait for %s: %v", p.Name, err)
	}
	return states
}

func firstService(p *types.Project) string {
	for n := range p.Services {
		return n
	}
	return ""
}

// state is the state of service among states.
func state(t *testing.T, states []backend.ServiceState, service string) backend.ServiceState {
	t.Helper()
	s, ok := stateOf(states, service)
	if !ok {
		t.Fatalf("no state for service %s among %d", service, len(states))
	}
	return s
}

// stateOf is service's state among states.
func stateOf(states []backend.ServiceState, service string) (backend.ServiceState, bool) {
	for _, s := range states {
		if s.Service == service {
			return s, true
		}
	}
	return backend.ServiceState{}, false
}

// target is the exec and file target of a service as Wait reported it.
func target(s backend.ServiceState) backend.Target {
	return backend.Target{Container: s.ContainerID, Service: s.Service, WorkingDir: s.WorkingDir, User: s.User}
}

// projectNamed is the listed project of that name, if listed.
func projectNamed(ps []backend.Project, name string) (backend.Project, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	return backend.Project{}, false
}

// names are the names of ps that belong to this run, sorted as listed.
func (e *env) names(ps []backend.Project) []string {
	var out []string
	for _, p := range ps {
		if strings.HasSuffix(p.Name, "-"+e.run) && strings.HasPrefix(p.Name, e.h.Prefix+"-") {
			out = append(out, p.Name)
		}
	}
	return out
}
