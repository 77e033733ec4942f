package orchestrator_test

import (
	"context"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/composebox/composebox/orchestrator"
)

// Each service reports its container's steps (created, started) before it is ready, both for
// services compose starts together and for one started after its dependency is healthy; and
// the compose library prints nothing to the process's stdout or stderr meanwhile.
func TestServiceProgressBeforeReady(t *testing.T) {
	o, rec := newOrchestrator(t)
	task := taskInit(t, o, inline(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      db:
        condition: service_healthy
  db:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    healthcheck:
      test: ["CMD", "true"]
      interval: 200ms
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`))
	printed := captureStdio(t)
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if out := printed(); out != "" {
		t.Errorf("the process's stdout/stderr got %q during SampleInit", out)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	events := slices.Clone(rec.events)
	rec.mu.Unlock()
	for _, svc := range []string{"default", "db", "side"} {
		var steps []string
		ready := false
		for _, e := range events {
			if e.Project != s.Project() || e.Service != svc {
				continue
			}
			switch e.Kind {
			case orchestrator.EventServiceProgress:
				if ready {
					t.Errorf("%s: progress %q after service_ready", svc, e.Message)
				}
				steps = append(steps, e.Message)
			case orchestrator.EventServiceReady:
				ready = true
			}
		}
		if !ready {
			t.Errorf("%s: no service_ready event", svc)
		}
		ci, si := slices.Index(steps, "created"), slices.Index(steps, "started")
		if ci < 0 || si < 0 || ci > si {
			t.Errorf("%s: steps %v, want created then started", svc, steps)
		}
	}
}

// captureStdio points os.Stdout and os.Stderr at a pipe until the returned function is
// called, which restores them and returns what was written.
func captureStdio(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = w, w
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	restored := false
	restore := func() string {
		if restored {
			return ""
		}
		restored = true
		os.Stdout, os.Stderr = stdout, stderr
		_ = w.Close()
		out := <-got
		_ = r.Close()
		return out
	}
	t.Cleanup(func() { restore() })
	return restore
}
