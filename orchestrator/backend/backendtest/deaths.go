package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// deathTimeout bounds how long a death may take to be reported.
const deathTimeout = 2 * time.Minute

// testDeaths watches the shared project's deaths, makes its victim exit, and expects the
// watch to report it, and the container to be seen stopped afterwards.
func (e *env) testDeaths(t *testing.T, s *started) {
	victim := state(t, s.states, ServiceVictim)
	wctx, cancel := context.WithTimeout(t.Context(), deathTimeout)
	defer cancel()
	// The watch starts a little in the past: an engine replays what it saw since then, so a
	// death in the instant the stream takes to open is not missed.
	deaths, errs := e.b.WatchDeaths(wctx, backend.WatchOptions{Labels: labels.ProjectSelector(s.name), Since: time.Now().Add(-time.Second)})

	if e.h.Kill != nil {
		e.h.Kill(t, e.b, victim)
	} else {
		// Its main process reads the fifo and exits once it gets a line.
		res, err := e.b.Exec(ctx(t), target(victim), backend.ExecRequest{Cmd: []string{"sh", "-c", "echo die > /tmp/die"}, User: "root"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("tell the victim to exit: %+v, %v", res, err)
		}
	}
	for {
		select {
		case d, ok := <-deaths:
			if !ok {
				t.Fatalf("the death watch ended without reporting %s: %v", victim.Container, <-errs)
			}
			if d.Project != s.name {
				t.Fatalf("the death watch of project %s reported %+v, of another project", s.name, d)
			}
			// Every backend names a death as Wait named the service's container: its
			// service, its name and its id.
			dead, ok := stateOf(s.states, d.Service)
			if !ok {
				t.Fatalf("the death watch reported %+v, of no service of the project", d)
			}
			if d.Container != dead.Container || d.ContainerID != dead.ContainerID {
				t.Fatalf("the death watch reported %+v, want service %s's container named %q, id %q, as Wait named it", d, d.Service, dead.Container, dead.ContainerID)
			}
			if d.Service != ServiceVictim {
				continue // the one-shot service's exit, replayed
			}
			info, err := e.b.Inspect(ctx(t), victim.ContainerID)
			if err != nil || info.Running {
				t.Errorf("inspect %s after its death: %+v, %v, want it stopped", victim.Container, info, err)
			}
			if e.h.Kill == nil && info.ExitCode != victimExit {
				t.Errorf("victim's exit code %d, want %d", info.ExitCode, victimExit)
			}
			return
		case err := <-errs:
			t.Fatalf("the death watch failed before reporting %s: %v", victim.Container, err)
		case <-wctx.Done():
			t.Fatalf("no death of %s reported within %s", victim.Container, deathTimeout)
		}
	}
}
