package orchestrator_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
	"github.com/composebox/composebox/orchestrator"
)

// TestDaemonLoss stops the engine under a live sample. Every call then fails, within a bounded
// time, as ErrUnavailable (none hangs), and once the engine is back, Task.Cleanup removes
// everything the task made.
func TestDaemonLoss(t *testing.T) {
	d := testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxdl"})
	c, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	o, err := orchestrator.New(orchestrator.WithClient(c), orchestrator.WithStateDir(t.TempDir()),
		orchestrator.WithSubnets(orchestrator.Subnets{Pool: netip.MustParsePrefix("10.218.0.0/16")}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: "daemon-loss"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background(), orchestrator.CleanupOptions{Timeout: time.Minute}) })
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	sb := s.Default()
	if res, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"echo", "up"}}); err != nil || res.StdoutText() != "up\n" {
		t.Fatalf("exec before the loss: %q %v", res.StdoutText(), err)
	}
	running, err := sb.ExecStream(ctx, orchestrator.ExecRequest{Cmd: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	label := labels.LabelTask + "=daemon-loss"
	if testutil.Resources(t, c, label) == 0 {
		t.Fatal("no resource of the sample found on the private daemon")
	}

	d.Stop()

	// Every call must come back as ErrUnavailable well before its own ctx ends: an answer of
	// ErrTimeout (or no answer) would be a hang.
	bounded := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		err := call(cctx)
		if !errors.Is(err, orchestrator.ErrUnavailable) || cctx.Err() != nil {
			t.Errorf("%s with the daemon gone: %v (after %s), want ErrUnavailable", what, err, time.Since(start).Round(time.Millisecond))
		}
	}
	bounded("running exec", func(context.Context) error { _, err := running.Wait(); return err })
	bounded("exec", func(ctx context.Context) error {
		_, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		return err
	})
	bounded("exec stream", func(ctx context.Context) error {
		_, err := sb.ExecStream(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		return err
	})
	bounded("read file", func(ctx context.Context) error { _, err := sb.ReadFile(ctx, "/etc/hostname"); return err })
	bounded("write file", func(ctx context.Context) error { return sb.WriteFile(ctx, "/tmp/x", []byte("x")) })
	bounded("open", func(ctx context.Context) error { _, err := o.Open(ctx, s.Project()); return err })
	bounded("sample init", func(ctx context.Context) error {
		s2, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
		if err == nil {
			_ = s2.Cleanup(context.Background())
		}
		return err
	})
	bounded("sample cleanup", func(ctx context.Context) error {
		return s.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Minute})
	})
	bounded("task cleanup", func(ctx context.Context) error {
		return task.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Minute})
	})

	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatalf("task cleanup once the daemon is back: %v", err)
	}
	if n := testutil.Resources(t, c, label); n != 0 {
		t.Fatalf("%d containers, networks and volumes of the task left on the daemon after its cleanup", n)
	}
}
