package sandboxio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The exec types are the backend boundary's (orchestrator/backend): this package is the
// Docker implementation of them.
type (
	ExecRequest = backend.ExecRequest
	WindowSize  = backend.WindowSize
	ExecResult  = backend.ExecResult
	ExecError   = backend.ExecError
)

// DefaultOutputLimit is the per-stream cap on captured output when ExecRequest.OutputLimit is 0.
const DefaultOutputLimit = backend.DefaultOutputLimit

// Exec runs req in the target's container and waits for it, reading stdout and stderr to
// their ends while it writes stdin. It costs exactly the engine's three calls (create,
// attach, inspect) on the normal path.
//
// Errors: ErrUnavailable (with the container's state, exit code, OOM flag and log tail)
// when the container is gone or stopped, including when it dies under the command;
// ErrTimeout; ErrOutputLimit under StrictLimit; ErrPermission for a non-executable argv[0]
// (ExitCode 126). A missing argv[0] is ExitCode 127 and an unknown user ExitCode 126 with
// the engine's message in Stderr, both without an error. Whenever a result exists it is
// returned alongside the error, and the error is an *ExecError carrying it too.
func Exec(ctx context.Context, t Target, req ExecRequest) (ExecResult, error) {
	op := execOp(req.Cmd)
	spec, err := t.execSpec(req, op)
	if err != nil {
		return ExecResult{}, err
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	stdout, stderr := newTailBuffer(limit, req.StrictLimit), newTailBuffer(limit, req.StrictLimit)
	spec.stdout = withSink(stdout, req.Stdout, "stdout", spec.abort)
	spec.stderr = withSink(stderr, req.Stderr, "stderr", spec.abort)
	e, err := start(ctx, t, spec, op)
	if err != nil {
		return ExecResult{}, err
	}
	o, err := e.wait(ctx, op)
	return t.finish(ctx, req, op, o, err, stdout, stderr)
}

// execOp names an exec in error messages by its argv[0].
func execOp(cmd []string) string {
	if len(cmd) == 0 {
		return "exec"
	}
	return "exec " + cmd[0]
}

// execSpec validates req and turns it into what the engine needs.
func (t Target) execSpec(req ExecRequest, op string) (runSpec, error) {
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return runSpec{}, errdefs.New(errdefs.ErrInvalidConfig, op+t.in()+": empty command")
	}
	for _, a := range req.Cmd {
		if strings.ContainsRune(a, 0) {
			return runSpec{}, errdefs.New(errdefs.ErrInvalidConfig, op+t.in()+": argument holds a NUL byte")
		}
	}
	env := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		if !validEnvKey(k) || strings.ContainsRune(v, 0) {
			return runSpec{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("%s%s: invalid environment variable %q", op, t.in(), k))
		}
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	user := req.User
	if user == "" {
		user = t.User
	}
	cwd := t.WorkingDir
	if req.Cwd != "" {
		cwd = t.Resolve(req.Cwd)
	}
	if len(req.Stdin) > 0 && req.StdinReader != nil {
		return runSpec{}, errdefs.New(errdefs.ErrInvalidConfig, op+t.in()+": both Stdin and StdinReader are set; use one")
	}
	if !req.TTY && (req.Resize != nil || req.Size != (WindowSize{})) {
		return runSpec{}, errdefs.New(errdefs.ErrInvalidConfig, op+t.in()+": Size and Resize need TTY")
	}
	spec := runSpec{cmd: req.Cmd, env: env, user: user, workdir: cwd, timeout: req.Timeout, abort: make(chan struct{}),
		tty: req.TTY, size: req.Size, resize: req.Resize}
	switch {
	case len(req.Stdin) > 0:
		spec.stdin = bytes.NewReader(req.Stdin)
	case req.StdinReader != nil:
		spec.stdin = req.StdinReader
	}
	return spec, nil
}

// finish turns an outcome into the result and the error the contract asks for.
func (t Target) finish(ctx context.Context, req ExecRequest, op string, o outcome, err error, stdout, stderr *tailBuffer) (ExecResult, error) {
	res := ExecResult{
		ExitCode:        o.exitCode,
		Stdout:          stdout.Bytes(),
		Stderr:          stderr.Bytes(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		StdoutBytes:     stdout.total,
		StderrBytes:     stderr.total,
		Duration:        o.duration,
	}
	if err != nil {
		return res, &ExecError{Result: res, Err: err}
	}
	fail := func(err error) (ExecResult, error) {
		if o.killErr != nil {
			err = fmt.Errorf("%w (and its processes could not be killed: %v)", err, o.killErr)
		}
		return res, &ExecError{Result: res, Err: err}
	}
	if !o.started {
		// Nothing ran: the stream held the engine's message, which belongs in Stderr.
		res.Stdout, res.StdoutTruncated, res.StdoutBytes = nil, false, 0
		res.Stderr = []byte(o.startMsg + "\n")
		res.StderrTruncated, res.StderrBytes = false, int64(len(res.Stderr))
		if req.Stderr != nil {
			// A caller streaming stderr sees why nothing ran there too, as it would see a
			// shell's "not found".
			_, _ = req.Stderr.Write(res.Stderr)
		}
		switch o.startFail {
		case startNotFound:
			res.ExitCode = 127
		case startPermission:
			res.ExitCode = 126
			return fail(errdefs.New(errdefs.ErrPermission, fmt.Sprintf("%s%s: %s: permission denied", op, t.in(), req.Cmd[0])))
		case startCwd:
			return fail(errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s%s: working directory %s: no such directory", op, t.in(), t.Resolve(req.Cwd))))
		}
		return res, nil
	}
	switch o.end {
	case endExited:
		return res, nil
	case endTimeout:
		return fail(errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("%s%s: timed out after %s", op, t.in(), req.Timeout)))
	case endCanceled:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail(errdefs.Wrap(errdefs.ErrTimeout, ctx.Err(), op+t.in()))
		}
		return fail(fmt.Errorf("%s%s: %w", op, t.in(), ctx.Err()))
	case endSink:
		var se *sinkError
		if errors.As(o.endErr, &se) {
			return fail(fmt.Errorf("%s%s: %w", op, t.in(), se))
		}
		if stdout.Truncated() || stderr.Truncated() {
			return fail(errdefs.New(errdefs.ErrOutputLimit, fmt.Sprintf("%s%s: output past the %d byte limit", op, t.in(), stdout.limit)))
		}
		return fail(fmt.Errorf("%s%s: %w", op, t.in(), o.endErr))
	case endStdin:
		return fail(fmt.Errorf("%s%s: read stdin: %w", op, t.in(), o.endErr))
	case endStream:
		return fail(fmt.Errorf("%s%s: read output: %w", op, t.in(), o.endErr))
	case endKilled:
		if o.killErr != nil {
			return res, &ExecError{Result: res, Err: fmt.Errorf("%s%s: kill: %w", op, t.in(), o.killErr)}
		}
		return res, nil
	}
	return res, nil
}

var _ io.Writer = (*tailBuffer)(nil)

// ExecDetached starts req in the background, as `docker exec -d` does, and returns the
// engine's exec id once the command runs; nothing waits for it or reads its output. Stdin,
// Stdout, Stderr and Timeout do not apply and are refused. A command that cannot start
// fails here, as an *ExecError whose Result holds the exit code the foreground exec would
// give (127 not found, 126 cannot run) and the engine's message in Stderr.
func ExecDetached(ctx context.Context, t Target, req ExecRequest) (string, error) {
	op := execOp(req.Cmd)
	if req.Stdin != nil || req.StdinReader != nil || req.Stdout != nil || req.Stderr != nil || req.Timeout > 0 {
		return "", errdefs.New(errdefs.ErrInvalidConfig, op+t.in()+": a detached exec takes no stdin, output writers or timeout")
	}
	spec, err := t.execSpec(req, op)
	if err != nil {
		return "", err
	}
	created, err := t.Client.ContainerExecCreate(ctx, t.Container, container.ExecOptions{
		User: spec.user, WorkingDir: spec.workdir, Env: append(spec.env, TagEnv+"="+newTag()), Cmd: spec.cmd, Detach: true,
	})
	if err != nil {
		return "", t.engineError(ctx, op, err)
	}
	serr := t.Client.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{Detach: true})
	msg := ""
	if serr != nil {
		msg = serr.Error()
	}
	ins, ierr := t.Client.ContainerExecInspect(ctx, created.ID)
	if serr == nil && ierr == nil && (ins.Pid != 0 || ins.Running) {
		return created.ID, nil
	}
	if serr == nil && ierr != nil {
		return "", t.engineError(ctx, op, ierr)
	}
	if msg == "" {
		msg = fmt.Sprintf("the command did not start (exit code %d)", ins.ExitCode)
	}
	res := ExecResult{ExitCode: 126, Stderr: []byte(msg + "\n")}
	res.StderrBytes = int64(len(res.Stderr))
	switch classifyStart(msg) {
	case startNotFound:
		res.ExitCode = 127
		return "", &ExecError{Result: res, Err: errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s%s: %s: command not found", op, t.in(), req.Cmd[0]))}
	case startCwd:
		return "", &ExecError{Result: res, Err: errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s%s: working directory %s: no such directory", op, t.in(), spec.workdir))}
	case startOther:
		if serr != nil && !strings.Contains(strings.ToLower(msg), "oci runtime") {
			return "", t.engineError(ctx, op, serr)
		}
	}
	return "", &ExecError{Result: res, Err: errdefs.New(errdefs.ErrPermission, fmt.Sprintf("%s%s: %s", op, t.in(), msg))}
}
