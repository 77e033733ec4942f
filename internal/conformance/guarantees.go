package conformance

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// guaranteeCases are the promises that hold whatever the caller does with its streams: an
// unread stream never blocks its command, writers get every byte, stdin streams from a
// reader, and a reader or writer that blocks never holds a file call past its ctx.
func guaranteeCases() []Case {
	return []Case{
		{Name: "stream/unread-output-finishes-with-its-tail", Run: func(t *testing.T, e *Env) {
			const total = 8_000_000
			const limit = 1 << 20
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"head", "-c", "8000000", "/dev/zero"}, OutputLimit: limit})
			if err != nil {
				t.Fatal(err)
			}
			// Nobody reads Events: the command must finish anyway.
			res, err := waitProcess(t, p)
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			if res.ExitCode != 0 || !res.StdoutTruncated || res.StdoutBytes != total || len(res.Stdout) != limit {
				t.Fatalf("exit %d, truncated %t, %d bytes written, %d kept; want 0, true, %d, %d", res.ExitCode, res.StdoutTruncated, res.StdoutBytes, len(res.Stdout), total, limit)
			}
			var data, dropped int64
			for ev := range p.Events() {
				data += int64(len(ev.Data))
				dropped += ev.Dropped
			}
			if dropped == 0 || data >= total {
				t.Fatalf("events: %d bytes delivered, %d marked dropped; want a drop marker", data, dropped)
			}
		}},
		{Name: "exec/writers-get-every-byte", Run: func(t *testing.T, e *Env) {
			var out, errOut bytes.Buffer
			res, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{
				Cmd:         []string{"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo done >&2"},
				OutputLimit: 64 << 10, Stdout: &out, Stderr: &errOut,
			})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exit %d: %v", res.ExitCode, err)
			}
			if out.Len() != 3_000_000 || strings.Trim(out.String(), "x") != "" || errOut.String() != "done\n" {
				t.Fatalf("writers got %d stdout bytes (all x: %t), stderr %q", out.Len(), strings.Trim(out.String(), "x") == "", errOut.String())
			}
			if !res.StdoutTruncated || len(res.Stdout) != 64<<10 || res.StdoutBytes != 3_000_000 {
				t.Fatalf("result: truncated %t, %d kept of %d", res.StdoutTruncated, len(res.Stdout), res.StdoutBytes)
			}
		}},
		{Name: "stream/writers-get-every-byte-unread", Run: func(t *testing.T, e *Env) {
			var out bytes.Buffer
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"head", "-c", "5000000", "/dev/zero"}, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			res, err := waitProcess(t, p)
			if err != nil || res.ExitCode != 0 || out.Len() != 5_000_000 {
				t.Fatalf("exit %d, writer got %d bytes, want 5000000: %v", res.ExitCode, out.Len(), err)
			}
		}},
		{Name: "exec/failing-writer-fails-the-call", Run: func(t *testing.T, e *Env) {
			broken := errors.New("disk full")
			_, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"sh", "-c", "exec yes writer-fails-mark"}, Stdout: failingWriter{broken}})
			if !errors.Is(err, broken) {
				t.Fatalf("err = %v, want the writer's error", err)
			}
			waitGone(t, e, "yes writer-fails-mark")
		}},
		{Name: "stdin/reader-streams", Run: func(t *testing.T, e *Env) {
			pr, pw := io.Pipe()
			t.Cleanup(func() { _ = pw.Close() })
			p, err := e.SB.ExecStream(ctxFor(t), sandboxio.ExecRequest{
				Cmd:         []string{"sh", "-c", "read a; echo got $a; read b; echo got $b"},
				StdinReader: pr,
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(pw, "one\n"); err != nil {
				t.Fatal(err)
			}
			// The second line is written only once the command has answered the first: the
			// reader streams, it is not read to its end first.
			var got string
			for !strings.Contains(got, "got one\n") {
				select {
				case ev, ok := <-p.Events():
					if !ok {
						t.Fatalf("events ended before the first answer: %q", got)
					}
					got += string(ev.Data)
				case <-ctxFor(t).Done():
					t.Fatalf("no answer to the first line: %q", got)
				}
			}
			if _, err := io.WriteString(pw, "two\n"); err != nil {
				t.Fatal(err)
			}
			_ = pw.Close()
			for ev := range p.Events() {
				got += string(ev.Data)
			}
			res, err := p.Wait()
			if err != nil || res.ExitCode != 0 || got != "got one\ngot two\n" {
				t.Fatalf("exit %d, output %q: %v", res.ExitCode, got, err)
			}
		}},
		{Name: "stdin/reader-large", Run: func(t *testing.T, e *Env) {
			in := bigData()[:20<<20]
			res := run(t, e, sandboxio.ExecRequest{Cmd: []string{"wc", "-c"}, StdinReader: bytes.NewReader(in)})
			if strings.TrimSpace(res.StdoutText()) != "20971520" {
				t.Fatalf("wc -c = %q", res.StdoutText())
			}
		}},
		{Name: "stdin/reader-and-bytes-conflict", Run: func(t *testing.T, e *Env) {
			_, err := e.SB.Exec(ctxFor(t), sandboxio.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("x"), StdinReader: strings.NewReader("y")})
			wantErr(t, err, errdefs.ErrInvalidConfig, "StdinReader")
		}},
		{Name: "file/write-from-blocked-reader-honours-ctx", Run: func(t *testing.T, e *Env) {
			r := newBlockedReader(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- e.SB.WriteFileFrom(ctx, e.Dir+"/blocked.txt", r, 100) }()
			select {
			case err := <-done:
				if !errors.Is(err, errdefs.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want a timeout", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("WriteFileFrom still blocked a minute after its ctx ended")
			}
		}},
		{Name: "file/read-to-blocked-writer-honours-ctx", Run: func(t *testing.T, e *Env) {
			p := e.Dir + "/big.bin"
			if err := e.SB.WriteFile(ctxFor(t), p, bigData()[:4<<20]); err != nil {
				t.Fatal(err)
			}
			w := &blockedWriter{release: newBlockedReader(t).release}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := e.SB.ReadFileTo(ctx, p, w, 0); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, errdefs.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want a timeout", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("ReadFileTo still blocked a minute after its ctx ended")
			}
		}},
	}
}

// waitProcess waits for p, failing the test if it has not finished within the call timeout.
func waitProcess(t *testing.T, p Process) (sandboxio.ExecResult, error) {
	t.Helper()
	type result struct {
		res sandboxio.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() { r, err := p.Wait(); done <- result{r, err} }()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctxFor(t).Done():
		_ = p.Kill(context.Background())
		t.Fatal("the command did not finish while nobody read its events")
		return sandboxio.ExecResult{}, nil
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// blockedReader blocks every Read until the test ends.
type blockedReader struct{ release chan struct{} }

func newBlockedReader(t *testing.T) *blockedReader {
	r := &blockedReader{release: make(chan struct{})}
	t.Cleanup(func() { close(r.release) })
	return r
}

func (r *blockedReader) Read([]byte) (int, error) {
	<-r.release
	return 0, io.EOF
}

// blockedWriter blocks every Write until release closes.
type blockedWriter struct{ release chan struct{} }

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return 0, io.ErrClosedPipe
}
