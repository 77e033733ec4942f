package sandboxio_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// TestNoShell covers an image without /bin/sh: exec still works, a timeout still kills
// (through the host fallback, since this test runs next to the engine), and file operations
// say what is missing.
func TestNoShell(t *testing.T) {
	target := newTarget(t, "root")
	ctx := t.Context()
	res, err := sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"rm", "/bin/sh"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("remove /bin/sh: %v %s", err, res.StderrText())
	}
	res, err = sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"echo", "still works"}})
	if err != nil || res.StdoutText() != "still works\n" {
		t.Fatalf("exec without a shell: %q %v", res.StdoutText(), err)
	}

	_, err = sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"sleep", "4242"}, Timeout: 500 * time.Millisecond})
	if !errors.Is(err, errdefs.ErrTimeout) || strings.Contains(err.Error(), "could not be killed") {
		t.Fatalf("timeout without a shell: %v", err)
	}
	ps, err := sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"ps", "-o", "pid,args"}})
	if err != nil || strings.Contains(ps.StdoutText(), "sleep 4242") {
		t.Fatalf("sleep survived the timeout: %v\n%s", err, ps.StdoutText())
	}

	for op, call := range map[string]func() error{
		"read":  func() error { _, err := sandboxio.ReadFile(ctx, target, "/etc/passwd", 0); return err },
		"write": func() error { return sandboxio.WriteFile(ctx, target, "/tmp/x", []byte("x")) },
	} {
		err := call()
		if !errors.Is(err, errdefs.ErrPrerequisite) || !strings.Contains(err.Error(), "/bin/sh") {
			t.Errorf("%s without a shell: %v", op, err)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	target := sandboxio.Target{Client: testutil.Docker(t), Container: "unused", Service: "svc"}
	for name, req := range map[string]sandboxio.ExecRequest{
		"empty argv":  {},
		"empty name":  {Cmd: []string{""}},
		"nul in argv": {Cmd: []string{"echo", "a\x00b"}},
		"bad env key": {Cmd: []string{"true"}, Env: map[string]string{"A=B": "x"}},
		"empty key":   {Cmd: []string{"true"}, Env: map[string]string{"": "x"}},
	} {
		_, err := sandboxio.Exec(t.Context(), target, req)
		if !errors.Is(err, errdefs.ErrInvalidConfig) || !strings.Contains(err.Error(), "in svc") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestWriteFileFromFailingSource(t *testing.T) {
	target := newTarget(t, "sandbox")
	ctx := t.Context()
	err := sandboxio.WriteFileFrom(ctx, target, "short.bin", strings.NewReader("only this"), 100)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "/workspace/short.bin") {
		t.Fatalf("short source: %v", err)
	}
	boom := errors.New("boom")
	err = sandboxio.WriteFileFrom(ctx, target, "fail.bin", iotest.ErrReader(boom), -1)
	if !errors.Is(err, boom) {
		t.Fatalf("failing source: %v", err)
	}
	// Exactly size bytes are taken, and a source of unknown size is read to its end.
	if err := sandboxio.WriteFileFrom(ctx, target, "exact.bin", strings.NewReader("0123456789"), 4); err != nil {
		t.Fatal(err)
	}
	if err := sandboxio.WriteFileFrom(ctx, target, "unknown.bin", strings.NewReader("whole"), -1); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"exact.bin": "0123", "unknown.bin": "whole"} {
		if got, err := sandboxio.ReadFile(ctx, target, p, 0); err != nil || string(got) != want {
			t.Errorf("%s: %q %v", p, got, err)
		}
	}
}

func TestUnknownTargetUser(t *testing.T) {
	target := newTarget(t, "sandbox")
	target.User = "ghost-user"
	err := sandboxio.WriteFile(t.Context(), target, "x.txt", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "ghost-user") || !strings.Contains(err.Error(), "/workspace/x.txt") {
		t.Fatalf("write as an unknown user: %v", err)
	}
}

func TestDiagnose(t *testing.T) {
	target := newTarget(t, "sandbox")
	d, err := sandboxio.Diagnose(t.Context(), target)
	if err != nil || !d.Running || d.Missing || d.Status != "running" {
		t.Fatalf("%+v %v", d, err)
	}
	target.Container = "composebox-no-such-container"
	d, err = sandboxio.Diagnose(t.Context(), target)
	if err != nil || !d.Missing || !strings.Contains(d.String(), "no longer exists") {
		t.Fatalf("%+v %v", d, err)
	}
	_, err = sandboxio.Exec(t.Context(), target, sandboxio.ExecRequest{Cmd: []string{"true"}})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("exec in a missing container: %v", err)
	}
}

// TestNoGoroutineLeak runs every kind of exec ending on a client of its own, closes the
// client, and checks that the goroutine count comes back to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	base := newTarget(t, "sandbox") // container set up on the shared client first
	before := runtime.NumGoroutine()
	c, err := engine.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	target := base
	target.Client = c
	ctx := t.Context()
	_, _ = sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"cat"}, Stdin: bytes.Repeat([]byte("x"), 1<<20)})
	_, _ = sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"sleep", "60"}, Timeout: 200 * time.Millisecond})
	_, _ = sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"yes"}, OutputLimit: 10, StrictLimit: true})
	_, _ = sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"no-such-binary"}})
	_, _ = sandboxio.ReadFile(ctx, target, "/dev/zero", 1000)
	_ = sandboxio.WriteFile(ctx, target, "/etc/denied", []byte("x"))
	cctx, cancel := context.WithCancel(ctx)
	p, err := sandboxio.ExecStream(cctx, target, sandboxio.ExecRequest{Cmd: []string{"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, _ = p.Wait()
	p, err = sandboxio.ExecStream(ctx, target, sandboxio.ExecRequest{Cmd: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Kill(ctx)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// TestAbandonedStreams starts a thousand streaming execs whose events nobody ever reads,
// each writing far more than Events buffers. Every one must finish by itself, a normal exec
// must still work, and nothing (goroutine, connection) may outlive them.
func TestAbandonedStreams(t *testing.T) {
	base := newTarget(t, "sandbox")
	before := runtime.NumGoroutine()
	c, err := engine.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	target := base
	target.Client = c
	ctx := t.Context()
	n, parallel := 1000, 8
	if testing.Short() {
		n = 50
	}
	sem := make(chan struct{}, parallel)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			p, err := sandboxio.ExecStream(ctx, target, sandboxio.ExecRequest{Cmd: []string{"seq", "1", "40000"}, OutputLimit: 1 << 10})
			if err != nil {
				errs <- err
				return
			}
			select {
			case <-p.Done():
			case <-time.After(time.Minute):
				errs <- errors.New("an unread stream did not finish within a minute")
				_ = p.Kill(context.Background())
				return
			}
			res, err := p.Wait()
			if err == nil && (!res.StdoutTruncated || len(res.Stdout) != 1<<10 || res.StdoutBytes <= 1<<10) {
				err = fmt.Errorf("unread stream %d: truncated %t, %d bytes kept of %d; want the 1 KiB tail of a truncated stream", i, res.StdoutTruncated, len(res.Stdout), res.StdoutBytes)
			}
			errs <- err
		}()
	}
	for range parallel {
		sem <- struct{}{}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := sandboxio.Exec(ctx, target, sandboxio.ExecRequest{Cmd: []string{"echo", "still fine"}})
	if err != nil || res.StdoutText() != "still fine\n" {
		t.Fatalf("exec after %d abandoned streams: %q %v", n, res.StdoutText(), err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
