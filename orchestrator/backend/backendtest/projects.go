package backendtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

func ptr[T any](v T) *T { return &v }

// healthcheck is a probe that passes at once, polled often so that Wait is quick.
func healthcheck(test ...string) *types.HealthCheckConfig {
	return &types.HealthCheckConfig{Test: append(types.HealthCheckTest{"CMD"}, test...),
		Interval: ptr(types.Duration(250 * time.Millisecond)), Timeout: ptr(types.Duration(10 * time.Second)), Retries: ptr(uint64(120))}
}

// completed is a dependency on service having exited 0.
func completed(service string) types.DependsOnConfig {
	return types.DependsOnConfig{service: {Condition: types.ServiceConditionCompletedSuccessfully, Required: true}}
}

// victimExit is the exit code of ServiceVictim once told to die.
const victimExit = 7

// testUp starts the project the sandbox and death cases share, its removal registered on
// owner: a healthchecked service that waits for a one-shot one to have exited 0, and the
// victim of the death watch.
func (e *env) testUp(t, owner *testing.T) *started {
	name := e.name("shared")
	web := idle()
	web.HealthCheck = healthcheck("true")
	web.DependsOn = completed(ServiceOneShot)
	victim := types.ServiceConfig{
		// It exits once something is written to its fifo, which the healthcheck waits for.
		Command:     types.ShellCommand{"sh", "-c", "mkfifo /tmp/die && read x < /tmp/die; exit " + itoa(victimExit)},
		HealthCheck: healthcheck("test", "-p", "/tmp/die"),
	}
	p := e.project(name, meta{task: e.name("task")}, map[string]types.ServiceConfig{
		ServiceWeb:     web,
		ServiceOneShot: {Command: types.ShellCommand{"sh", "-c", "echo one-shot done"}},
		ServiceVictim:  victim,
	})
	states := e.start(t, owner, p)

	// A backend may run the healthcheck's probe itself rather than wait for the engine's
	// first one: the engine may then still say "starting" of a service that is ready.
	w := state(t, states, ServiceWeb)
	if !w.Ready || w.State != backend.StateRunning || (w.Health != "healthy" && w.Health != "starting") || w.ContainerID == "" {
		t.Errorf("healthchecked service after Wait: %+v, want ready, running and healthy (or starting)", w)
	}
	if o := state(t, states, ServiceOneShot); !o.Ready || o.State != "exited" || o.ExitCode != 0 {
		t.Errorf("one-shot service after Wait: %+v, want ready, exited 0", o)
	}
	v := state(t, states, ServiceVictim)
	if !v.Ready || v.State != backend.StateRunning {
		t.Errorf("victim after Wait: %+v, want ready and running", v)
	}

	info, err := e.b.Inspect(ctx(t), w.ContainerID)
	if err != nil || !info.Running || info.State != backend.StateRunning {
		t.Errorf("inspect %s: %+v, %v, want it running", w.ContainerID, info, err)
	}
	running, err := e.b.Containers(ctx(t), labels.ProjectSelector(name), false)
	if err != nil || len(running) != 2 {
		t.Errorf("running containers of %s: %d, %v, want 2 (the one-shot one exited)", name, len(running), err)
	}
	all, err := e.b.Containers(ctx(t), labels.ProjectSelector(name), true)
	if err != nil || len(all) != 3 {
		t.Errorf("containers of %s, stopped ones too: %d, %v, want 3", name, len(all), err)
	}
	for _, c := range all {
		if c.Labels[labels.LabelTask] != e.name("task") || c.Labels[labels.LabelManaged] != "true" {
			t.Errorf("container %s lacks composebox's labels: %v", c.Name, c.Labels)
		}
	}
	// The listing agrees with what Wait returned, at once: a backend that handed the sample
	// over on its own sighting (a cluster whose kubelet posts later) lists that sighting.
	ps, err := e.b.ListProjects(ctx(t))
	lp, ok := projectNamed(ps, name)
	if err != nil || !ok {
		t.Fatalf("list projects: %s not listed (%v)", name, err)
	}
	if lp.Task != e.name("task") || lp.Containers != 3 || lp.Running != 2 || !healthyOrStarting(lp.Health) || lp.Stale {
		t.Errorf("listed project: %+v, want its task, 3 containers of which 2 run, health ok, not stale", lp)
	}
	if t.Failed() {
		return nil
	}
	return &started{name: name, states: states}
}

// started is a project that came up, as Wait described it.
type started struct {
	name   string
	states []backend.ServiceState
}

// testNotReady checks that a dependency that fails makes Up or Wait fail with the typed error
// naming it, with its exit code and the end of its logs.
func (e *env) testNotReady(t *testing.T) {
	name := e.name("notready")
	app := idle()
	app.DependsOn = completed(ServiceFailing)
	p := e.project(name, meta{task: e.name("task")}, map[string]types.ServiceConfig{
		ServiceFailing: {Command: types.ShellCommand{"sh", "-c", "echo '" + FailingOutput + "'; exit " + itoa(FailingExitCode)}},
		"app":          app,
	})
	err := e.up(t, t, p)
	if err == nil {
		_, err = e.b.Wait(ctx(t), p, backend.WaitOptions{})
	}
	var nr *backend.NotReadyError
	if !errors.As(err, &nr) {
		t.Fatalf("up and wait of a project whose dependency fails: %v, want a *backend.NotReadyError", err)
	}
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("not-ready error %v is not ErrUnavailable", err)
	}
	if nr.Project != name || nr.Reason != "exited" {
		t.Errorf("not-ready error names project %q, reason %q; want %q, exited", nr.Project, nr.Reason, name)
	}
	var failing *backend.ServiceState
	for i := range nr.Services {
		if nr.Services[i].Service == ServiceFailing {
			failing = &nr.Services[i]
		}
	}
	if failing == nil {
		t.Fatalf("not-ready error does not name service %s: %v", ServiceFailing, err)
	}
	if failing.State != "exited" || failing.ExitCode != FailingExitCode || failing.Ready {
		t.Errorf("failing service: %+v, want exited %d and not ready", *failing, FailingExitCode)
	}
	if !strings.Contains(failing.Logs, FailingOutput) || !strings.Contains(err.Error(), FailingOutput) {
		t.Errorf("not-ready error lacks the failing service's log tail %q: %v", FailingOutput, err)
	}
}

// testDown checks that Down removes everything of a project, and that removing it again, or
// a project that never existed, is no error and removes nothing.
func (e *env) testDown(t *testing.T) {
	name := e.name("down")
	p := e.project(name, meta{task: e.name("task")}, map[string]types.ServiceConfig{"idle": idle()})
	states := e.start(t, t, p)
	id := state(t, states, "idle").ContainerID

	removed, err := e.b.Down(ctx(t), name, backend.DownOptions{})
	if err != nil || removed.Containers != 1 {
		t.Fatalf("down %s: %+v, %v, want its one container removed", name, removed, err)
	}
	left, err := e.b.Containers(ctx(t), labels.ProjectSelector(name), true)
	if err != nil || len(left) != 0 {
		t.Errorf("containers of %s after down: %d, %v", name, len(left), err)
	}
	ps, err := e.b.ListProjects(ctx(t))
	if _, ok := projectNamed(ps, name); ok || err != nil {
		t.Errorf("list projects after down: %s still listed (%v)", name, err)
	}
	if _, err := e.b.Inspect(ctx(t), id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("inspect a removed container: %v, want ErrNotFound", err)
	}
	again, err := e.b.Down(ctx(t), name, backend.DownOptions{})
	if err != nil || again != (backend.Removed{}) {
		t.Errorf("second down of %s: %+v, %v, want nothing removed and no error", name, again, err)
	}
	never := e.name("never")
	none, err := e.b.Down(ctx(t), never, backend.DownOptions{})
	if err != nil || none != (backend.Removed{}) {
		t.Errorf("down of %s, which never existed: %+v, %v, want nothing removed and no error", never, none, err)
	}
}

// healthyOrStarting says whether a listed project's health is "ok", or names only services the
// engine still calls starting: a backend that ran a healthcheck's probe itself hands a service
// over before the engine's own first probe (web's, or victim's).
func healthyOrStarting(h string) bool {
	if h == "ok" {
		return true
	}
	for _, part := range strings.Split(h, ",") {
		if !strings.HasSuffix(part, ":starting") {
			return false
		}
	}
	return h != ""
}
