package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The exec subresource has no working directory, environment or user of its own, and
// cancelling its stream kills nothing in the container. So every command runs under a small
// shell wrapper: it changes directory, then execs env(1), which sets the environment plus a
// marker variable unique to the call; a command that must be killed is found, children and
// all, by that marker in /proc/PID/environ. A command that clears its environment escapes the
// kill (as a process that leaves its process group does on Docker's).
const (
	execMarker = "COMPOSEBOX_EXEC_ID"
	// codeNoCwd is the wrapper's exit code for a working directory that does not exist.
	codeNoCwd    = 240
	wrapScript   = `d=$1; shift; if [ -n "$d" ]; then cd -- "$d" 2>/dev/null || exit 240; fi; exec env "$@"`
	detachScript = `d=$1; shift; if [ -n "$d" ]; then cd -- "$d" 2>/dev/null || exit 240; fi; env "$@" </dev/null >/dev/null 2>&1 & echo $!`
	killScript   = `for s in STOP KILL; do for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = "$$" ] && continue
tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "$1" && kill -$s "$n" 2>/dev/null; done; done; exit 0`
)

// errStop is what a capture returns past a strict limit: the stream stops and the command is
// killed.
var errStop = errors.New("output limit reached")

// capture keeps a stream's last limit bytes (or, strict, its first), counts all, and passes
// every byte to the caller's writer and the streaming feed.
type capture struct {
	limit   int
	strict  bool
	buf     []byte
	total   int64
	trunc   bool
	w       io.Writer
	deliver func([]byte)
	onStop  func()
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if c.deliver != nil {
		c.deliver(p)
	}
	if c.w != nil {
		if _, err := c.w.Write(p); err != nil {
			return 0, err
		}
	}
	c.total += int64(n)
	if c.strict && len(c.buf)+n > c.limit {
		c.buf = append(c.buf, p[:c.limit-len(c.buf)]...)
		c.trunc = true
		if c.onStop != nil {
			c.onStop()
		}
		return n, errStop
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) > 2*c.limit {
		c.buf = append(c.buf[:0], c.buf[len(c.buf)-c.limit:]...)
	}
	if len(c.buf) > c.limit {
		c.trunc = true
	}
	return n, nil
}

func (c *capture) bytes() []byte {
	if len(c.buf) > c.limit {
		return c.buf[len(c.buf)-c.limit:]
	}
	return c.buf
}

// stream runs argv in the target's pod over one executor (WebSocket, falling back to SPDY)
// and returns its exit code.
func (b *Backend) stream(ctx context.Context, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer, tty bool, sizes remotecommand.TerminalSizeQueue) (int, error) {
	ns, pod, err := splitID(container)
	if err != nil {
		return 0, err
	}
	ex, err := b.executor(ns, pod, &corev1.PodExecOptions{Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: !tty, TTY: tty})
	if err != nil {
		return 0, err
	}
	so := remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Tty: tty, TerminalSizeQueue: sizes}
	if !tty {
		so.Stderr = stderr
	}
	err = ex.StreamWithContext(ctx, so)
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	if err != nil && strings.Contains(err.Error(), "not found") {
		return 0, errdefs.Wrap(errdefs.ErrNotFound, err, "kubernetes: pod "+container)
	}
	return 0, err
}

// kill kills every process of the call marked id, on a context of its own.
func (b *Backend) kill(ctx context.Context, container, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if _, err := b.stream(ctx, container, []string{"sh", "-c", killScript, "sh", execMarker + "=" + id}, nil, io.Discard, io.Discard, false, nil); err != nil {
		b.log.Warn("kill exec", "container", container, "err", err)
	}
}

// argv wraps req's command for t.
func argv(t backend.Target, req backend.ExecRequest, script, id string) ([]string, error) {
	if len(req.Cmd) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, "exec: empty command")
	}
	if len(req.Stdin) > 0 && req.StdinReader != nil {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, "exec: Stdin and StdinReader are exclusive")
	}
	if req.User != "" && !sameUser(req.User, t.User) {
		return nil, notSupported("exec as user " + req.User + " (execs run as the pod's user)")
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = t.WorkingDir
	} else if !path.IsAbs(cwd) {
		cwd = path.Join(dirOr(t.WorkingDir), cwd)
	}
	out := []string{"sh", "-c", script, "sh", cwd, execMarker + "=" + id}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		if k == "" || strings.Contains(k, "=") {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("exec: environment variable name %q", k))
		}
		out = append(out, k+"="+req.Env[k])
	}
	return append(out, req.Cmd...), nil
}

// sameUser reports two user specs that name the same user as far as the spec alone tells:
// equal, or root in any spelling.
func sameUser(a, b string) bool {
	root := func(u string) bool { return u == "" || u == "root" || u == "0" || u == "0:0" || u == "root:root" }
	return a == b || root(a) && root(b)
}

func dirOr(d string) string {
	if d == "" {
		return "/"
	}
	return d
}

type sizeQueue struct {
	first *backend.WindowSize
	ch    <-chan backend.WindowSize
	ctx   context.Context
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if q.first != nil {
		s := q.first
		q.first = nil
		return &remotecommand.TerminalSize{Width: uint16(s.Cols), Height: uint16(s.Rows)}
	}
	select {
	case s, ok := <-q.ch:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: uint16(s.Cols), Height: uint16(s.Rows)}
	case <-q.ctx.Done():
		return nil
	}
}

// run is Exec and ExecStream: feed, when set, receives the output and a kill.
func (b *Backend) run(ctx context.Context, t backend.Target, req backend.ExecRequest, feed *backend.ProcessFeed) (backend.ExecResult, error) {
	start := time.Now()
	id := uuid.NewString()
	cmd, err := argv(t, req, wrapScript, id)
	if err != nil {
		return backend.ExecResult{}, err
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = backend.DefaultOutputLimit
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tctx context.Context = sctx
	if req.Timeout > 0 {
		var tcancel context.CancelFunc
		tctx, tcancel = context.WithTimeout(sctx, req.Timeout)
		defer tcancel()
	}
	var (
		mu      sync.Mutex
		limited bool
		killed  bool
	)
	stop := func() { mu.Lock(); limited = true; mu.Unlock(); cancel() }
	out := &capture{limit: limit, strict: req.StrictLimit, w: req.Stdout, onStop: stop}
	errc := &capture{limit: limit, strict: req.StrictLimit, w: req.Stderr, onStop: stop}
	if feed != nil {
		out.deliver = func(p []byte) { feed.Deliver(backend.Stdout, p) }
		errc.deliver = func(p []byte) { feed.Deliver(backend.Stderr, p) }
		go func() {
			select {
			case <-feed.Stopped():
				mu.Lock()
				killed = true
				mu.Unlock()
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	var stdin io.Reader
	switch {
	case req.StdinReader != nil:
		stdin = req.StdinReader
	case len(req.Stdin) > 0:
		stdin = bytes.NewReader(req.Stdin)
	}
	var sizes remotecommand.TerminalSizeQueue
	if req.TTY {
		q := &sizeQueue{ch: req.Resize, ctx: tctx}
		if req.Size.Rows > 0 {
			q.first = &req.Size
		}
		sizes = q
	}
	code, serr := b.stream(tctx, t.Container, cmd, stdin, out, errc, req.TTY, sizes)
	res := backend.ExecResult{ExitCode: code, Stdout: out.bytes(), Stderr: errc.bytes(), StdoutTruncated: out.trunc,
		StderrTruncated: errc.trunc, StdoutBytes: out.total, StderrBytes: errc.total, Duration: time.Since(start)}
	mu.Lock()
	lim, kil := limited, killed
	mu.Unlock()
	what := "exec " + strings.Join(req.Cmd, " ")
	if t.Service != "" {
		what += " in " + t.Service
	}
	switch {
	case lim:
		b.kill(ctx, t.Container, id)
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrOutputLimit, fmt.Sprintf("%s: output past %d bytes", what, limit))}
	case kil:
		b.kill(ctx, t.Container, id)
		res.ExitCode = 137
		return res, nil
	case ctx.Err() != nil:
		b.kill(ctx, t.Container, id)
		return res, &backend.ExecError{Result: res, Err: fmt.Errorf("%s: %w", what, ctx.Err())}
	case tctx.Err() != nil:
		b.kill(ctx, t.Container, id)
		res.ExitCode = 137
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("%s: timed out after %s", what, req.Timeout))}
	case serr != nil:
		return res, fmt.Errorf("%s: %w", what, serr)
	case code == codeNoCwd && errc.total == 0:
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s: no such working directory %s", what, cmd[4]))}
	case code == 126 && bytes.Contains(errc.bytes(), []byte("Permission denied")):
		// env(1) could not execute argv[0]: Docker's exec fails the same way before it runs.
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrPermission, fmt.Sprintf("%s: %s is not executable", what, req.Cmd[0]))}
	}
	return res, nil
}

// Exec runs a command to its end.
func (b *Backend) Exec(ctx context.Context, t backend.Target, req backend.ExecRequest) (backend.ExecResult, error) {
	return b.run(ctx, t, req, nil)
}

// ExecStream starts a command whose output streams as it comes.
func (b *Backend) ExecStream(ctx context.Context, t backend.Target, req backend.ExecRequest) (*backend.Process, error) {
	if _, err := argv(t, req, wrapScript, ""); err != nil {
		return nil, err
	}
	p, feed := backend.NewProcess()
	go func() {
		res, err := b.run(ctx, t, req, feed)
		feed.Finish(res, err)
	}()
	return p, nil
}

// ExecDetached starts a command in the background and returns its pid in the container.
func (b *Backend) ExecDetached(ctx context.Context, t backend.Target, req backend.ExecRequest) (string, error) {
	cmd, err := argv(t, req, detachScript, uuid.NewString())
	if err != nil {
		return "", err
	}
	var out, errb bytes.Buffer
	code, err := b.stream(ctx, t.Container, cmd, nil, &out, &errb, false, nil)
	if err != nil {
		return "", err
	}
	if code == codeNoCwd {
		return "", errdefs.New(errdefs.ErrNotFound, "exec detached: no such working directory")
	}
	pid := strings.TrimSpace(out.String())
	if _, err := strconv.Atoi(pid); code != 0 || err != nil {
		return "", fmt.Errorf("exec detached: exit %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return pid, nil
}
