package fakebackend

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// DefaultScript knows a few commands: true, false, echo ARGS, cat (stdin to stdout), sleep
// SECONDS (until killed), sh -c "exit N", test (false: the fake has no bash), env (the
// request's Env), pwd and id -u (of the request's Cwd and User, which the fake has
// resolved against the target). Anything else is not found (127).
func DefaultScript(ctx context.Context, _ Container, req backend.ExecRequest, stdout, stderr io.Writer) int {
	switch req.Cmd[0] {
	case "env":
		if len(req.Cmd) == 1 {
			for _, k := range slices.Sorted(maps.Keys(req.Env)) {
				fmt.Fprintf(stdout, "%s=%s\n", k, req.Env[k])
			}
			return 0
		}
	case "pwd":
		fmt.Fprintln(stdout, req.Cwd)
		return 0
	case "id":
		if len(req.Cmd) == 2 && req.Cmd[1] == "-u" {
			uid, _, _ := strings.Cut(req.User, ":")
			switch uid {
			case "", "root":
				uid = "0"
			case "sandbox":
				uid = "1000"
			}
			fmt.Fprintln(stdout, uid)
			return 0
		}
	case "true":
		return 0
	case "false", "test":
		return 1
	case "echo":
		fmt.Fprintln(stdout, strings.Join(req.Cmd[1:], " "))
		return 0
	case "cat":
		in := req.StdinReader
		if in == nil {
			in = bytes.NewReader(req.Stdin)
		}
		_, _ = io.Copy(stdout, in)
		return 0
	case "sleep":
		d := time.Hour
		if len(req.Cmd) > 1 {
			if n, err := time.ParseDuration(req.Cmd[1] + "s"); err == nil {
				d = n
			}
		}
		select {
		case <-time.After(d):
			return 0
		case <-ctx.Done():
			return 137
		}
	case "sh":
		if len(req.Cmd) == 3 && req.Cmd[1] == "-c" {
			var code int
			if _, err := fmt.Sscanf(req.Cmd[2], "exit %d", &code); err == nil {
				return code
			}
			return 0
		}
	}
	fmt.Fprintf(stderr, "%s: not found\n", req.Cmd[0])
	return 127
}

// DefaultReadLimit is ReadFile's size limit when the caller passes 0, as on a real engine
// (negative: none).
const DefaultReadLimit = 100 << 20

// running finds a container that can run a command, as a lost engine, a gone container or a
// stopped one fails it: ErrUnavailable.
func (b *Backend) running(op string, t backend.Target) (*container, Script, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked(op); err != nil {
		return nil, nil, errdefs.Wrap(errdefs.ErrUnavailable, err, strings.ToLower(op)+" in "+t.Service+": fake engine unreachable")
	}
	c, ok := b.containers[t.Container]
	if !ok || !c.running {
		return nil, nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s in %s: %s", strings.ToLower(op), t.Service, b.diagnoseLocked(t)))
	}
	return c, b.script, nil
}

func (b *Backend) stillRunning(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.containers[id]
	return ok && c.running
}

// run runs req's script in c and returns its result, as sandboxio's Exec would.
func (b *Backend) run(ctx context.Context, t backend.Target, c *container, script Script, req backend.ExecRequest, deliver func(backend.StreamKind, []byte), stop <-chan struct{}) (backend.ExecResult, error) {
	if len(req.Cmd) == 0 {
		return backend.ExecResult{}, errdefs.New(errdefs.ErrInvalidConfig, "exec in "+t.Service+": empty command")
	}
	start := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if req.Timeout > 0 {
		var tcancel context.CancelFunc
		rctx, tcancel = context.WithTimeout(rctx, req.Timeout)
		defer tcancel()
	}
	go func() {
		select {
		case <-stop: // nil: never
			cancel()
		case <-c.died:
			cancel()
		case <-rctx.Done():
		}
	}()
	// The script sees where and as whom the command runs, as the target resolves them.
	switch {
	case req.Cwd != "":
		req.Cwd = resolve(t, req.Cwd)
	case t.WorkingDir != "":
		req.Cwd = t.WorkingDir
	default:
		req.Cwd = c.workdir
	}
	req.User = cmp.Or(req.User, t.User)
	var stdout, stderr bytes.Buffer
	code := script(rctx, c.Container, req, &sink{buf: &stdout, w: req.Stdout, kind: backend.Stdout, deliver: deliver}, &sink{buf: &stderr, w: req.Stderr, kind: backend.Stderr, deliver: deliver})
	res := backend.ExecResult{ExitCode: code, StdoutBytes: int64(stdout.Len()), StderrBytes: int64(stderr.Len()), Duration: time.Since(start)}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = backend.DefaultOutputLimit
	}
	res.Stdout, res.StdoutTruncated = tail(stdout.Bytes(), limit)
	res.Stderr, res.StderrTruncated = tail(stderr.Bytes(), limit)
	op := "exec " + req.Cmd[0] + " in " + t.Service
	switch {
	case req.StrictLimit && (res.StdoutTruncated || res.StderrTruncated):
		res.Stdout, res.Stderr = head(stdout.Bytes(), limit), head(stderr.Bytes(), limit)
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrOutputLimit, op+": output limit exceeded")}
	case !b.stillRunning(c.ID):
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrUnavailable, op+": "+b.diagnose(t).String())}
	case ctx.Err() != nil:
		return res, &backend.ExecError{Result: res, Err: fmt.Errorf("%s: %w", op, ctx.Err())}
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("%s: timed out after %s", op, req.Timeout))}
	}
	return res, nil
}

func tail(b []byte, limit int) ([]byte, bool) {
	if len(b) > limit {
		return bytes.Clone(b[len(b)-limit:]), true
	}
	return bytes.Clone(b), false
}

func head(b []byte, limit int) []byte { return bytes.Clone(b[:min(len(b), limit)]) }

// sink keeps a stream, feeds the request's writer and a streaming exec's events.
type sink struct {
	buf     *bytes.Buffer
	w       io.Writer
	kind    backend.StreamKind
	deliver func(backend.StreamKind, []byte)
}

func (s *sink) Write(p []byte) (int, error) {
	s.buf.Write(p)
	if s.w != nil {
		if _, err := s.w.Write(p); err != nil {
			return 0, err
		}
	}
	if s.deliver != nil {
		s.deliver(s.kind, p)
	}
	return len(p), nil
}

func (b *Backend) Exec(ctx context.Context, t backend.Target, req backend.ExecRequest) (backend.ExecResult, error) {
	c, script, err := b.running("Exec", t)
	if err != nil {
		return backend.ExecResult{}, err
	}
	return b.run(ctx, t, c, script, req, nil, nil)
}

func (b *Backend) ExecDetached(ctx context.Context, t backend.Target, req backend.ExecRequest) (string, error) {
	c, script, err := b.running("ExecDetached", t)
	if err != nil {
		return "", err
	}
	go func() { _, _ = b.run(context.WithoutCancel(ctx), t, c, script, req, nil, nil) }()
	return "exec-" + itoa(b.Calls("ExecDetached")), nil
}

func (b *Backend) ExecStream(ctx context.Context, t backend.Target, req backend.ExecRequest) (*backend.Process, error) {
	c, script, err := b.running("ExecStream", t)
	if err != nil {
		return nil, err
	}
	p, feed := backend.NewProcess()
	go func() { feed.Finish(b.run(ctx, t, c, script, req, feed.Deliver, feed.Stopped())) }()
	return p, nil
}

func (b *Backend) fileContainer(op string, t backend.Target) (*container, error) {
	c, _, err := b.running(op, t)
	return c, err
}

func (b *Backend) ReadFile(ctx context.Context, t backend.Target, p string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := b.ReadFileTo(ctx, t, p, &buf, limit); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (b *Backend) ReadFileTo(_ context.Context, t backend.Target, p string, w io.Writer, limit int64) (int64, error) {
	c, err := b.fileContainer("ReadFile", t)
	if err != nil {
		return 0, err
	}
	abs := resolve(t, p)
	b.mu.Lock()
	data, ok := c.files[abs]
	data = bytes.Clone(data)
	b.mu.Unlock()
	if !ok {
		return 0, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("read %s in %s: no such file", abs, t.Service))
	}
	if limit == 0 {
		limit = DefaultReadLimit
	}
	if limit > 0 && int64(len(data)) > limit {
		n, _ := w.Write(data[:limit])
		return int64(n), errdefs.New(errdefs.ErrOutputLimit, fmt.Sprintf("read %s in %s: larger than %d bytes", abs, t.Service, limit))
	}
	n, err := w.Write(data)
	return int64(n), err
}

func (b *Backend) WriteFile(ctx context.Context, t backend.Target, p string, data []byte) error {
	return b.WriteFileFrom(ctx, t, p, bytes.NewReader(data), int64(len(data)))
}

func (b *Backend) WriteFileFrom(_ context.Context, t backend.Target, p string, r io.Reader, size int64) error {
	c, err := b.fileContainer("WriteFile", t)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err != nil {
		return fmt.Errorf("write %s in %s: %w", p, t.Service, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("write %s in %s: got %d bytes, want %d", p, t.Service, len(data), size)
	}
	b.mu.Lock()
	c.files[resolve(t, p)] = data
	b.mu.Unlock()
	return nil
}

// ReadDirTo writes the files under path as a tar archive of its contents.
func (b *Backend) ReadDirTo(_ context.Context, t backend.Target, p string, w io.Writer) error {
	c, err := b.fileContainer("ReadDir", t)
	if err != nil {
		return err
	}
	dir := resolve(t, p)
	b.mu.Lock()
	files := maps.Clone(c.files)
	b.mu.Unlock()
	tw := tar.NewWriter(w)
	found := false
	for _, name := range slices.Sorted(maps.Keys(files)) {
		rel, ok := strings.CutPrefix(name, strings.TrimSuffix(dir, "/")+"/")
		if !ok {
			continue
		}
		found = true
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return err
		}
	}
	if !found {
		return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("read directory %s in %s: no such directory", dir, t.Service))
	}
	return tw.Close()
}

func (b *Backend) WriteDirFrom(_ context.Context, t backend.Target, p string, r io.Reader) error {
	c, err := b.fileContainer("WriteDir", t)
	if err != nil {
		return err
	}
	dir := resolve(t, p)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("write directory %s in %s: %w", dir, t.Service, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		b.mu.Lock()
		c.files[resolve(backend.Target{WorkingDir: dir}, h.Name)] = data
		b.mu.Unlock()
	}
}

func (b *Backend) Inspect(_ context.Context, id string) (backend.ContainerInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Inspect"); err != nil {
		return backend.ContainerInfo{}, err
	}
	c, ok := b.containers[id]
	if !ok {
		return backend.ContainerInfo{}, errdefs.New(errdefs.ErrNotFound, "container "+id+": no such container")
	}
	return backend.ContainerInfo{ID: c.ID, Name: c.Name, State: c.state(), Running: c.running, ExitCode: c.exitCode, WorkingDir: c.workdir}, nil
}

func (b *Backend) Diagnose(_ context.Context, t backend.Target) (backend.Diagnosis, error) {
	if err := b.call("Diagnose"); err != nil {
		return backend.Diagnosis{}, err
	}
	return b.diagnose(t), nil
}

func (b *Backend) diagnose(t backend.Target) backend.Diagnosis {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.diagnoseLocked(t)
}

func (b *Backend) diagnoseLocked(t backend.Target) backend.Diagnosis {
	c, ok := b.containers[t.Container]
	if !ok {
		return backend.Diagnosis{Container: t.Container, Missing: true}
	}
	return backend.Diagnosis{Container: t.Container, Name: c.Name, Status: c.state(), Running: c.running, ExitCode: c.exitCode, LogTail: string(c.logs)}
}

func (b *Backend) Logs(_ context.Context, id string, opts backend.LogsOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Logs"); err != nil {
		return err
	}
	c, ok := b.containers[id]
	if !ok {
		return errdefs.New(errdefs.ErrNotFound, "container "+id+": no such container")
	}
	if opts.Stdout != nil && opts.Tail >= 0 {
		_, _ = opts.Stdout.Write(c.logs)
	}
	return nil
}

// SetLogs sets what a container's main process wrote.
func (b *Backend) SetLogs(id string, logs []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.containers[id]; ok {
		c.logs = bytes.Clone(logs)
	}
}

func (b *Backend) ShellCommand(c backend.ContainerInfo, user, shell string) string {
	if user != "" {
		return fmt.Sprintf("fake-exec --user %s %s %s", user, c.Name, shell)
	}
	return fmt.Sprintf("fake-exec %s %s", c.Name, shell)
}
