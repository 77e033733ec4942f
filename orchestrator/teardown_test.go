package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// raceProject has two services, so that Up spends a while creating networks and containers:
// room for a Task.Cleanup to land in the middle.
const raceProject = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

// TestTaskCleanupRacingSampleInitLeavesNothing races Task.Cleanup (a signal handler, say)
// against a SampleInit in flight, landing at different points of it: before it starts
// anything, while Up creates the containers, and once they run. Whatever SampleInit answers,
// nothing of the task may remain once Cleanup has returned.
func TestTaskCleanupRacingSampleInitLeavesNothing(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := dockerClient(t, o)
	rounds := 50
	if testing.Short() {
		rounds = 6
	}
	for i := range rounds {
		name := fmt.Sprintf("race%d", i)
		task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(raceProject)})
		label := labels.LabelTask + "=" + name
		type result struct {
			s   *orchestrator.Sample
			err error
		}
		done := make(chan result, 1)
		go func() {
			s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
			done <- result{s, err}
		}()
		switch i % 3 {
		case 0:
			// At once: SampleInit may not even have registered its sample.
		case 1:
			// Mid-Up: as soon as the first resource of the sample exists.
			waitFor(t, func() bool { return testutil.Resources(t, c, label) > 0 }, done)
		case 2:
			// Once its containers run (or SampleInit has returned).
			waitFor(t, func() bool {
				list, err := c.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", label))})
				return err == nil && len(list) > 0
			}, done)
		}
		if err := task.Cleanup(context.Background()); err != nil {
			t.Fatalf("round %d: task cleanup: %v", i, err)
		}
		r := <-done
		if n := testutil.Resources(t, c, label); n != 0 {
			t.Fatalf("round %d (sample init: %v): %d containers, networks and volumes left after Task.Cleanup", i, r.err, n)
		}
		if r.err != nil && !errors.Is(r.err, orchestrator.ErrUnavailable) && !errors.Is(r.err, context.Canceled) {
			t.Errorf("round %d: sample init interrupted by cleanup: %v, want ErrUnavailable", i, r.err)
		}
		if _, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{}); !errors.Is(err, orchestrator.ErrUnavailable) {
			t.Fatalf("round %d: sample init after cleanup: %v, want ErrUnavailable", i, err)
		}
	}
}

// waitFor polls cond until it holds, or until SampleInit has returned (its result is put
// back for the caller).
func waitFor[T any](t *testing.T, cond func() bool, done chan T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case r := <-done:
			done <- r
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
	}
}

// TestFailedCleanupIsRetried: a teardown that runs out of time fails and leaves the sample,
// the next Cleanup call removes it, and a call after that success does nothing.
func TestFailedCleanupIsRetried(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := dockerClient(t, o)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "retry-cleanup"})
	label := labels.LabelTask + "=retry-cleanup"
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })

	if err := s.Cleanup(t.Context(), orchestrator.CleanupOptions{Timeout: time.Nanosecond}); err == nil {
		t.Fatal("sample cleanup with a 1 ns budget succeeded")
	}
	if testutil.Resources(t, c, label) == 0 {
		t.Fatal("a failed sample cleanup removed the sample anyway; the test proves nothing")
	}
	if err := task.Cleanup(t.Context(), orchestrator.CleanupOptions{Timeout: time.Nanosecond}); err == nil {
		t.Fatal("task cleanup with a 1 ns budget succeeded")
	}
	if testutil.Resources(t, c, label) == 0 {
		t.Fatal("a failed task cleanup removed the sample anyway")
	}
	// A cancelled ctx alone does not abandon the teardown: the retry removes everything.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := task.Cleanup(ctx); err != nil {
		t.Fatalf("retried task cleanup: %v", err)
	}
	if n := testutil.Resources(t, c, label); n != 0 {
		t.Fatalf("%d resources left after the retried cleanup", n)
	}
	if err := task.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Nanosecond}); err != nil {
		t.Errorf("cleanup after a successful one: %v, want nil (nothing to do)", err)
	}
	if err := s.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Nanosecond}); err != nil {
		t.Errorf("sample cleanup after the task's: %v, want nil (nothing to do)", err)
	}
}

// TestSessionCleanupStopsRunningCommands: when Session.Cleanup returns, the commands that
// were running in it (a streaming one and a blocking Exec) have ended, and later calls fail
// with ErrUnavailable.
func TestSessionCleanupStopsRunningCommands(t *testing.T) {
	o, _ := newOrchestrator(t)
	s := spawnSession(t, o, orchestrator.ContainerSpec{Name: "cleanup-kills"}, orchestrator.SpawnOptions{})
	p, err := s.Start(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sleep", "3601"}})
	if err != nil {
		t.Fatal(err)
	}
	execDone := make(chan error, 1)
	go func() {
		_, err := s.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sleep", "3602"}})
		execDone <- err
	}()
	// Both commands run before the cleanup starts.
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := s.Sandbox().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"ps", "-o", "args"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.StdoutText(), "sleep 3601") && strings.Contains(res.StdoutText(), "sleep 3602") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("commands not running: %s", res.StdoutText())
		}
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.Poll() == nil {
		t.Error("the streaming command still runs after Session.Cleanup returned")
	}
	select {
	case <-execDone:
	default:
		t.Error("the blocking Exec had not returned when Session.Cleanup returned")
	}
	if _, err := s.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Errorf("exec after cleanup: %v, want ErrUnavailable", err)
	}
}

// TestUnreadStreamsDoNotHoldExecSlots: with one exec slot, streams whose events nobody reads
// still end and give their slot back, so the next exec runs.
func TestUnreadStreamsDoNotHoldExecSlots(t *testing.T) {
	o, _ := newOrchestrator(t, orchestrator.WithLimits(orchestrator.Limits{Execs: 1}))
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "unread-slots"})
	sb := startSamples(t, task, 1)[0].Default()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for i := range 20 {
		// Far more output than Events holds; never read.
		if _, err := sb.ExecStream(ctx, orchestrator.ExecRequest{Cmd: []string{"seq", "1", "40000"}}); err != nil {
			t.Fatalf("stream %d: %v (a stream nobody reads kept its slot)", i, err)
		}
	}
	res, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"echo", "ok"}})
	if err != nil || res.StdoutText() != "ok\n" {
		t.Fatalf("exec after unread streams: %q %v", res.StdoutText(), err)
	}
}
