package orchestrator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// TestFakeForkUnsupported: a backend without backend.Forker answers every verb with a typed
// unsupported error that names the backend and why, and doctor says it cannot fork.
func TestFakeForkUnsupported(t *testing.T) {
	_, o, _ := newFake(t)
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "nofork"})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	_, ferr := s.Fork(t.Context(), 2)
	_, serr := s.Snapshot(t.Context(), "x")
	rerr := s.Reset(t.Context(), "x")
	for _, err := range []error{ferr, serr, rerr} {
		var ue *backend.UnsupportedError
		if !errors.Is(err, errors.ErrUnsupported) || !errors.As(err, &ue) || ue.Backend != "fake" || ue.Reason == "" {
			t.Errorf("err = %v, want an UnsupportedError naming the fake backend", err)
		}
	}
	r, err := o.Doctor(t.Context(), orchestrator.DoctorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range r.Checks {
		if c.Name == "fork" {
			found = c.Status == backend.Warn && strings.Contains(c.Detail, "fake backend")
		}
	}
	if !found {
		t.Errorf("doctor's checks %v: want a fork warning naming the backend", r.Checks)
	}
}
