package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// callTimeout bounds every call a case makes, so that a hang fails the case instead of the
// whole run.
const callTimeout = 2 * time.Minute

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// run execs req and fails the test on an error.
func run(t *testing.T, e *Env, req sandboxio.ExecRequest) sandboxio.ExecResult {
	t.Helper()
	res, err := e.SB.Exec(ctxFor(t), req)
	if err != nil {
		t.Fatalf("exec %q: %v", req.Cmd, err)
	}
	return res
}

// sh runs a script as the default user and expects exit 0.
func sh(t *testing.T, e *Env, script string, args ...string) sandboxio.ExecResult {
	t.Helper()
	res := run(t, e, sandboxio.ExecRequest{Cmd: append([]string{"sh", "-c", script, "sh"}, args...)})
	if res.ExitCode != 0 {
		t.Fatalf("sh %q: exit %d, stdout %q, stderr %q", script, res.ExitCode, res.StdoutText(), res.StderrText())
	}
	return res
}

// rootSh runs a script as root and expects exit 0 (to arrange files the user may not touch).
func rootSh(t *testing.T, e *Env, script string, args ...string) sandboxio.ExecResult {
	t.Helper()
	res := run(t, e, sandboxio.ExecRequest{User: "root", Cmd: append([]string{"sh", "-c", script, "sh"}, args...)})
	if res.ExitCode != 0 {
		t.Fatalf("root sh %q: exit %d, stdout %q, stderr %q", script, res.ExitCode, res.StdoutText(), res.StderrText())
	}
	return res
}

func write(t *testing.T, e *Env, p string, data []byte) {
	t.Helper()
	if err := e.SB.WriteFile(ctxFor(t), p, data); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
}

func read(t *testing.T, e *Env, p string) []byte {
	t.Helper()
	got, err := e.SB.ReadFile(ctxFor(t), p, 0)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return got
}

// roundTrip writes data, reads it back through the API and through cat in the container,
// and compares all three.
func roundTrip(t *testing.T, e *Env, p string, data []byte) {
	t.Helper()
	write(t, e, p, data)
	if got := read(t, e, p); !bytes.Equal(got, data) {
		t.Fatalf("read %s back: %s", p, diff(got, data))
	}
	res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"cat", p}, OutputLimit: len(data) + 1})
	if !bytes.Equal(res.Stdout, data) {
		t.Fatalf("cat %s in the container: %s", p, diff(res.Stdout, data))
	}
}

// diff describes how got differs from want without printing megabytes.
func diff(got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d bytes, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d: got %#x, want %#x", i, got[i], want[i])
		}
	}
	return "equal"
}

// wantErr checks that err is in category cat (with errors.Is) and, when mention is set, that
// its message holds it (the path, for file errors).
func wantErr(t *testing.T, err error, cat error, mention string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", cat)
	}
	if !errors.Is(err, cat) {
		t.Fatalf("got %v, want an error matching %v", err, cat)
	}
	if mention != "" && !strings.Contains(err.Error(), mention) {
		t.Fatalf("error %q does not mention %q", err, mention)
	}
}

// processes lists the container's processes (pid and args), as root.
func processes(t *testing.T, e *Env) string {
	t.Helper()
	res := run(t, e, sandboxio.ExecRequest{User: "root", Cmd: []string{"ps", "-o", "pid,user,stat,args"}})
	return res.StdoutText()
}

// waitGone polls ps until no live process's args contain any of marks.
func waitGone(t *testing.T, e *Env, marks ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps := processes(t, e)
		left := ""
		for _, m := range marks {
			if strings.Contains(ps, m) {
				left = m
			}
		}
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %q still running:\n%s", left, ps)
		}
		pause(t, 50*time.Millisecond)
	}
}

// waitRunning polls ps until a process's args contain mark.
func waitRunning(t *testing.T, e *Env, mark string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(processes(t, e), mark) {
		if time.Now().After(deadline) {
			t.Fatalf("process %q never showed up", mark)
		}
		pause(t, 20*time.Millisecond)
	}
}

// pause is the interval of a deadline-bound poll, never a synchronisation by itself.
func pause(t *testing.T, d time.Duration) {
	select {
	case <-t.Context().Done():
	case <-time.After(d):
	}
}

var (
	bigOnce sync.Once
	big     []byte
)

// bigData is 50 MiB of reproducible random bytes, shared by the cases that need it.
func bigData() []byte {
	bigOnce.Do(func() {
		r := rand.NewChaCha8([32]byte{'c', 'o', 'm', 'p', 'o', 's', 'e', 'b', 'o', 'x'})
		big = make([]byte, 50<<20)
		_, _ = r.Read(big)
	})
	return big
}

// seq is "1\n2\n...n\n".
func seq(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}
