package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// TestOpenPicksTheDefaultServiceByLabel: the default service of x-default is "main", which
// sorts after "helper"; Open must find it from its label, not by name.
func TestOpenPicksTheDefaultServiceByLabel(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Path: project("x-default")})
	s := startSamples(t, task, 1)[0]
	opened, err := o.Open(t.Context(), s.Project())
	if err != nil {
		t.Fatal(err)
	}
	if got := opened.Default().Service(); got != "main" {
		t.Fatalf("Open's default service = %s, want main (by its label)", got)
	}
	if len(opened.Sandboxes()) != 2 {
		t.Fatalf("sandboxes %v, want main and helper", names(opened.Sandboxes()))
	}
}

// TestOpenDeadSampleIsUnavailable: a sample whose containers were killed exists, so it is not
// "not found": Open and every call on an already opened sandbox answer ErrUnavailable with
// the diagnosis (state and exit code). Only a project that does not exist is ErrNotFound.
func TestOpenDeadSampleIsUnavailable(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := dockerClient(t, o)
	task := taskInit(t, o, orchestrator.TaskSpec{Path: project("x-default")})
	s := startSamples(t, task, 1)[0]
	before, err := o.Open(t.Context(), s.Project())
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range s.Sandboxes() {
		if err := c.ContainerKill(t.Context(), sb.ContainerID(), "KILL"); err != nil {
			t.Fatal(err)
		}
		if err := testutil.WaitStopped(t.Context(), c, sb.ContainerID(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	_, err = o.Open(t.Context(), s.Project())
	wantUnavailable(t, "open", err)
	if !strings.Contains(err.Error(), "main") {
		t.Errorf("open: %v does not name the default service", err)
	}
	_, err = before.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}})
	wantUnavailable(t, "exec", err)
	_, err = before.Default().ReadFile(t.Context(), "/etc/hostname")
	wantUnavailable(t, "read", err)
	err = before.Default().WriteFile(t.Context(), "/tmp/x", []byte("x"))
	wantUnavailable(t, "write", err)
	_, err = before.Default().ExecStream(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}})
	wantUnavailable(t, "exec stream", err)

	if _, err := o.Open(t.Context(), "cbx-no-such-project-x1"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("open of a project that does not exist: %v, want ErrNotFound", err)
	}
	// The dead sample is still removed by its cleanup.
	if err := before.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open(t.Context(), s.Project()); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("open after cleanup: %v, want ErrNotFound", err)
	}
}

func wantUnavailable(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("%s on a dead sample: %v, want ErrUnavailable", op, err)
	}
	if !strings.Contains(err.Error(), "exit code 137") || !strings.Contains(err.Error(), "exited") {
		t.Errorf("%s: %v lacks the diagnosis (state, exit code)", op, err)
	}
}
