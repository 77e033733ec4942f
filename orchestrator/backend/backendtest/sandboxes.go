package backendtest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// binary is bytes that are not UTF-8 (and a NUL), which must come back as they went.
var binary = []byte{0xff, 0xfe, 'a', 0x00, 0xc3, 0x28, '\n', 0x80}

// testSandboxes runs the exec and file cases, in parallel, in the shared project's
// healthchecked service. The exhaustive suite of exec and file behaviour is
// internal/conformance's; these are the cases every backend must pass before it.
func (e *env) testSandboxes(t *testing.T, s *started) {
	tgt := target(state(t, s.states, ServiceWeb))
	exec := func(t *testing.T, req backend.ExecRequest) backend.ExecResult {
		t.Helper()
		res, err := e.b.Exec(ctx(t), tgt, req)
		if err != nil {
			t.Fatalf("exec %q: %v", req.Cmd, err)
		}
		return res
	}
	for _, c := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"exec/stdin", func(t *testing.T) {
			res := exec(t, backend.ExecRequest{Cmd: []string{"cat"}, Stdin: binary})
			if res.ExitCode != 0 || !bytes.Equal(res.Stdout, binary) {
				t.Errorf("cat of stdin: exit %d, stdout %q, want %q", res.ExitCode, res.Stdout, binary)
			}
		}},
		{"exec/exit-code", func(t *testing.T) {
			if res := exec(t, backend.ExecRequest{Cmd: []string{"sh", "-c", "exit 3"}}); res.ExitCode != 3 {
				t.Errorf("exit 3: exit code %d", res.ExitCode)
			}
		}},
		{"exec/not-found", func(t *testing.T) {
			if res := exec(t, backend.ExecRequest{Cmd: []string{"backendtest-no-such-command"}}); res.ExitCode != 127 {
				t.Errorf("a command that does not exist: exit code %d, want 127", res.ExitCode)
			}
		}},
		{"exec/env", func(t *testing.T) {
			res := exec(t, backend.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"BACKENDTEST": "a b=c"}})
			if res.ExitCode != 0 || !slices.Contains(strings.Split(res.StdoutText(), "\n"), "BACKENDTEST=a b=c") {
				t.Errorf("env: exit %d, %q, want BACKENDTEST=a b=c", res.ExitCode, res.StdoutText())
			}
		}},
		{"exec/cwd", func(t *testing.T) {
			if res := exec(t, backend.ExecRequest{Cmd: []string{"pwd"}, Cwd: "/tmp"}); res.StdoutText() != "/tmp\n" {
				t.Errorf("pwd in /tmp: %q", res.StdoutText())
			}
			if res := exec(t, backend.ExecRequest{Cmd: []string{"pwd"}}); res.StdoutText() != tgt.WorkingDir+"\n" {
				t.Errorf("pwd by default: %q, want the container's working directory %q", res.StdoutText(), tgt.WorkingDir)
			}
		}},
		{"exec/user", func(t *testing.T) {
			for user, uid := range map[string]string{"root": "0", "sandbox": "1000", "1000:1000": "1000"} {
				if res := exec(t, backend.ExecRequest{Cmd: []string{"id", "-u"}, User: user}); res.StdoutText() != uid+"\n" {
					t.Errorf("id -u as %s: %q, want %s", user, res.StdoutText(), uid)
				}
			}
		}},
		{"exec/truncation", func(t *testing.T) {
			in := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB
			res := exec(t, backend.ExecRequest{Cmd: []string{"cat"}, Stdin: in, OutputLimit: 1000})
			if !res.StdoutTruncated || res.StdoutBytes != int64(len(in)) || !bytes.Equal(res.Stdout, in[len(in)-1000:]) {
				t.Errorf("128 KiB past a 1000-byte limit: truncated %v, %d bytes counted, %d kept; want truncated, all counted, the last 1000 kept",
					res.StdoutTruncated, res.StdoutBytes, len(res.Stdout))
			}
			_, err := e.b.Exec(ctx(t), tgt, backend.ExecRequest{Cmd: []string{"cat"}, Stdin: in, OutputLimit: 1000, StrictLimit: true})
			var xe *backend.ExecError
			if !errors.Is(err, errdefs.ErrOutputLimit) || !errors.As(err, &xe) || !bytes.Equal(xe.Result.Stdout, in[:1000]) {
				t.Errorf("the same with a strict limit: %v, want ErrOutputLimit with the first 1000 bytes", err)
			}
		}},
		{"exec/stream", func(t *testing.T) {
			p, err := e.b.ExecStream(ctx(t), tgt, backend.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("streamed\n")})
			if err != nil {
				t.Fatalf("exec stream: %v", err)
			}
			var out bytes.Buffer
			for ev := range p.Events() {
				if ev.Stream == backend.Stdout {
					out.Write(ev.Data)
				}
			}
			res, err := p.Wait()
			if err != nil || res.ExitCode != 0 || out.String() != "streamed\n" || string(res.Stdout) != "streamed\n" {
				t.Errorf("streamed cat: %q on events, result %+v, %v", out.String(), res, err)
			}
		}},
		{"file/round-trip", func(t *testing.T) {
			p := "/tmp/backendtest-binary"
			if err := backend.WriteFile(ctx(t), e.b, tgt, p, binary); err != nil {
				t.Fatalf("write %s: %v", p, err)
			}
			got, err := backend.ReadFile(ctx(t), e.b, tgt, p, 0)
			if err != nil || !bytes.Equal(got, binary) {
				t.Errorf("read %s back: %q, %v, want %q", p, got, err, binary)
			}
		}},
		{"file/relative", func(t *testing.T) {
			rel := "backendtest-relative.txt"
			wd := backend.Target{Container: tgt.Container, Service: tgt.Service, WorkingDir: "/tmp", User: tgt.User}
			if err := backend.WriteFile(ctx(t), e.b, wd, rel, []byte("relative")); err != nil {
				t.Fatalf("write %s: %v", rel, err)
			}
			got, err := backend.ReadFile(ctx(t), e.b, tgt, "/tmp/"+rel, 0)
			if err != nil || string(got) != "relative" {
				t.Errorf("a relative path resolves against the target's working directory: /tmp/%s holds %q, %v", rel, got, err)
			}
		}},
		{"file/missing", func(t *testing.T) {
			p := "/tmp/backendtest-no-such-file"
			_, err := backend.ReadFile(ctx(t), e.b, tgt, p, 0)
			if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), p) {
				t.Errorf("read a missing file: %v, want ErrNotFound naming %s", err, p)
			}
		}},
		{"file/limit", func(t *testing.T) {
			p := "/tmp/backendtest-limit"
			if err := backend.WriteFile(ctx(t), e.b, tgt, p, bytes.Repeat([]byte("x"), 4096)); err != nil {
				t.Fatalf("write %s: %v", p, err)
			}
			if _, err := backend.ReadFile(ctx(t), e.b, tgt, p, 100); !errors.Is(err, errdefs.ErrOutputLimit) {
				t.Errorf("read 4096 bytes with a limit of 100: %v, want ErrOutputLimit", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}
