package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
// shell wrapper (userScript): it resolves the user and switches to it, changes directory, then
// execs env(1), which sets the environment plus a marker variable unique to the call; a
// command that must be killed is found, children and all, by that marker in
// /proc/PID/environ, by a second exec as the same user (root without CAP_SYS_PTRACE may not
// read another user's environ). A command that clears its environment escapes the kill (as a
// process that leaves its process group does on Docker's).
const (
	execMarker = "COMPOSEBOX_EXEC_ID"
	// codeNoCwd is the wrapper's exit code for a working directory that does not exist.
	codeNoCwd = 240
	runTail   = `exec "$@"`
	// drainTail runs the command, then reads what it left of a stdin given whole (which the
	// client closes at its end) before exiting with the command's status. A command that
	// exits without reading its input otherwise leaves the rest unsent, and the stream to the
	// kubelet then never ends (seen on the local cluster under load: an 8 MiB stdin to echo).
	drainTail  = `"$@"; rc=$?; cat >/dev/null 2>&1; exit $rc`
	detachTail = `"$@" </dev/null >/dev/null 2>&1 & echo $!`
	// killScript stops then kills every process whose environment holds $1, scanning again
	// until a scan finds none, so that a child forked during a scan goes too.
	killScript = `i=0; while [ $i -lt 20 ]; do i=$((i+1)); found=
for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" = "$$" ] && continue
tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "$1" && kill -STOP "$n" 2>/dev/null && found="$found $n"; done
[ -n "$found" ] || exit 0; kill -KILL $found 2>/dev/null; done; exit 0`
)

// errStop is what a capture returns past a strict limit, and a limitWriter past its limit:
// the stream stops and the command is killed.
var errStop = errors.New("output limit reached")

// capture keeps a stream's last limit bytes (or, strict, its first), counts all, and passes
// every byte to the caller's writer and the streaming feed. A writer that fails stops the
// command (onFail), as a full disk would stop a pipe.
type capture struct {
	limit   int
	strict  bool
	buf     []byte
	total   int64
	trunc   bool
	w       io.Writer
	deliver func([]byte)
	onStop  func()
	onFail  func(error)
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	if c.deliver != nil {
		c.deliver(p)
	}
	if c.w != nil {
		if _, err := c.w.Write(p); err != nil {
			if c.onFail != nil {
				c.onFail(err)
			}
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
	// Truncation is judged before the buffer is cut back to the limit: a chunk that fills
	// more than twice the limit leaves exactly the limit behind.
	if len(c.buf) > c.limit {
		c.trunc = true
	}
	if len(c.buf) > 2*c.limit {
		c.buf = append(c.buf[:0], c.buf[len(c.buf)-c.limit:]...)
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
	// The exec always asks for stdout (and stderr without a tty): a caller that wants neither
	// still gets them read, or the executor logs every message of a stream it was not given.
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
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
	return 0, err
}

// wrapped is cmd under userScript (with tail) for an exec as user in t, in cwd, with env's
// K=V before it.
func (b *Backend) wrapped(ctx context.Context, t backend.Target, user, cwd, tail string, env, cmd []string) ([]string, error) {
	m, err := b.modeFor(ctx, t.Container)
	if err != nil {
		return nil, err
	}
	args, err := userArgs(m, t.User, user, cwd)
	if err != nil {
		return nil, err
	}
	return slices.Concat([]string{"sh", "-c", userScript + tail, "sh"}, args, env, cmd), nil
}

// kill kills every process of the call marked id, as its user, on a context of its own.
func (b *Backend) kill(ctx context.Context, t backend.Target, user, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	argv, err := b.wrapped(ctx, t, user, "", runTail, nil, []string{"sh", "-c", killScript, "sh", execMarker + "=" + id})
	if err == nil {
		_, err = b.stream(ctx, t.Container, argv, nil, io.Discard, io.Discard, false, nil)
	}
	if err != nil {
		b.log.Warn("kill exec", "container", t.Container, "err", err)
	}
}

// checkRequest refuses what no backend could run.
func checkRequest(req backend.ExecRequest) error {
	if len(req.Cmd) == 0 {
		return errdefs.New(errdefs.ErrInvalidConfig, "exec: empty command")
	}
	if len(req.Stdin) > 0 && req.StdinReader != nil {
		return errdefs.New(errdefs.ErrInvalidConfig, "exec: Stdin and StdinReader are exclusive")
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("exec: environment variable name %q", k))
		}
	}
	return nil
}

// execCwd is where req runs: its Cwd resolved against the target's working directory.
func execCwd(t backend.Target, req backend.ExecRequest) string {
	switch {
	case req.Cwd == "":
		return t.WorkingDir
	case path.IsAbs(req.Cwd):
		return req.Cwd
	}
	return path.Join(dirOr(t.WorkingDir), req.Cwd)
}

// execEnv is the marker and req's environment, as env(1) takes them.
func execEnv(req backend.ExecRequest, id string) []string {
	out := []string{execMarker + "=" + id}
	for _, k := range slices.Sorted(maps.Keys(req.Env)) {
		out = append(out, k+"="+req.Env[k])
	}
	return out
}

// sameUser reports two user specs that name the same user as far as the spec alone tells:
// equal, or root in any spelling.
func sameUser(a, b string) bool {
	return a == b || isRoot(a) && isRoot(b)
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

// startReader signals the first read of a command's stdin: the executor reads it only once
// the stream to the container is up, so the command has been started.
type startReader struct {
	r    io.Reader
	once sync.Once
	ch   chan struct{}
}

func (s *startReader) Read(p []byte) (int, error) {
	s.once.Do(func() { close(s.ch) })
	return s.r.Read(p)
}

// run is Exec and ExecStream (feed set; started, when set, is closed once the command runs),
// and the file operations' exec (op then names the operation in errors).
func (b *Backend) run(ctx context.Context, t backend.Target, req backend.ExecRequest, feed *backend.ProcessFeed, op string, started chan struct{}) (backend.ExecResult, error) {
	start := time.Now()
	what := op
	if what == "" {
		what = "exec " + strings.Join(req.Cmd, " ")
	}
	if t.Service != "" {
		what += " in " + t.Service
	}
	if err := checkRequest(req); err != nil {
		return backend.ExecResult{}, err
	}
	id := uuid.NewString()
	cwd := execCwd(t, req)
	tail := runTail
	if len(req.Stdin) > 0 && req.StdinReader == nil && !req.TTY {
		tail = drainTail
	}
	cmd, err := b.wrapped(ctx, t, req.User, cwd, tail, execEnv(req, id), req.Cmd)
	if errors.Is(err, errdefs.ErrNotFound) {
		return backend.ExecResult{}, b.unavailable(ctx, t, what, err)
	}
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
		mu       sync.Mutex
		limited  bool
		killed   bool
		writeErr error
	)
	stop := func() { mu.Lock(); limited = true; mu.Unlock(); cancel() }
	fail := func(err error) {
		mu.Lock()
		if writeErr == nil {
			writeErr = err
		}
		mu.Unlock()
		cancel()
	}
	out := &capture{limit: limit, strict: req.StrictLimit, w: req.Stdout, onStop: stop, onFail: fail}
	errc := &capture{limit: limit, strict: req.StrictLimit, w: req.Stderr, onStop: stop, onFail: fail}
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
	case started != nil:
		// An empty stdin, closed at once, tells when the command has started.
		stdin = bytes.NewReader(nil)
	}
	if started != nil {
		stdin = &startReader{r: stdin, ch: started}
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
	lim, kil, werr := limited, killed, writeErr
	mu.Unlock()
	switch {
	case werr != nil:
		b.kill(ctx, t, req.User, id)
		return res, &backend.ExecError{Result: res, Err: fmt.Errorf("%s: %w", what, werr)}
	case lim:
		b.kill(ctx, t, req.User, id)
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrOutputLimit, fmt.Sprintf("%s: output past %d bytes", what, limit))}
	case kil:
		b.kill(ctx, t, req.User, id)
		res.ExitCode = 137
		return res, nil
	case ctx.Err() != nil:
		b.kill(ctx, t, req.User, id)
		return res, &backend.ExecError{Result: res, Err: fmt.Errorf("%s: %w", what, ctx.Err())}
	case tctx.Err() != nil:
		b.kill(ctx, t, req.User, id)
		res.ExitCode = 137
		return res, &backend.ExecError{Result: res, Err: errdefs.Wrap(errdefs.ErrTimeout, context.DeadlineExceeded, fmt.Sprintf("%s: timed out after %s", what, req.Timeout))}
	case serr != nil:
		if err := b.checkDead(ctx, t, what, serr); err != nil {
			return res, err
		}
		return res, fmt.Errorf("%s: %w", what, serr)
	case code == 137:
		// A container killed under the command kills the command first: a 137 is believed
		// once the container is seen to run.
		if err := b.checkDead(ctx, t, what, nil); err != nil {
			return res, &backend.ExecError{Result: res, Err: err}
		}
	case code == codeNoCwd && errc.total == 0:
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s: working directory %s: no such directory", what, cwd))}
	case code == 126 && bytes.Contains(errc.bytes(), []byte("Permission denied")):
		// env(1) could not execute argv[0]: Docker's exec fails the same way before it runs.
		return res, &backend.ExecError{Result: res, Err: errdefs.New(errdefs.ErrPermission, fmt.Sprintf("%s: %s: %s", what, req.Cmd[0], fs.ErrPermission))}
	}
	return res, nil
}

// Exec runs a command to its end.
func (b *Backend) Exec(ctx context.Context, t backend.Target, req backend.ExecRequest) (backend.ExecResult, error) {
	return b.run(ctx, t, req, nil, "", nil)
}

// ExecStream starts a command whose output streams as it comes. It returns once the command
// runs, or with the error that kept it from starting.
func (b *Backend) ExecStream(ctx context.Context, t backend.Target, req backend.ExecRequest) (*backend.Process, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	if err := b.knownDead(ctx, t, "exec "+strings.Join(req.Cmd, " ")); err != nil {
		return nil, err
	}
	p, feed := backend.NewProcess()
	started := make(chan struct{})
	go func() {
		res, err := b.run(ctx, t, req, feed, "", started)
		feed.Finish(res, err)
	}()
	select {
	case <-started:
	case <-p.Done():
		if _, err := p.Wait(); err != nil && !errors.As(err, new(*backend.ExecError)) {
			return nil, err
		}
	}
	return p, nil
}

// ExecDetached starts a command in the background and returns its pid in the container.
func (b *Backend) ExecDetached(ctx context.Context, t backend.Target, req backend.ExecRequest) (string, error) {
	if err := checkRequest(req); err != nil {
		return "", err
	}
	what := "exec " + strings.Join(req.Cmd, " ")
	cwd := execCwd(t, req)
	cmd, err := b.wrapped(ctx, t, req.User, cwd, detachTail, execEnv(req, uuid.NewString()), req.Cmd)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", b.unavailable(ctx, t, what, err)
	}
	if err != nil {
		return "", err
	}
	var out, errb bytes.Buffer
	code, err := b.stream(ctx, t.Container, cmd, nil, &out, &errb, false, nil)
	if err != nil {
		if derr := b.checkDead(ctx, t, what, err); derr != nil {
			return "", derr
		}
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if code == codeNoCwd {
		return "", errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s: working directory %s: no such directory", what, cwd))
	}
	pid := strings.TrimSpace(out.String())
	if _, err := strconv.Atoi(pid); code != 0 || err != nil {
		res := backend.ExecResult{ExitCode: code, Stdout: out.Bytes(), Stderr: errb.Bytes()}
		return "", &backend.ExecError{Result: res, Err: fmt.Errorf("%s: exit %d: %s", what, code, strings.TrimSpace(errb.String()))}
	}
	return pid, nil
}
