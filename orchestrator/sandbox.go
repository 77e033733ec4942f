package orchestrator

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/composebox/composebox/orchestrator/backend"
)

// Exec types, the backend boundary's.
type (
	// ExecRequest is one command: argv (no implicit shell), stdin, cwd, env, user, timeout and
	// output caps. The zero value of every field but Cmd is the default.
	ExecRequest = backend.ExecRequest
	// ExecResult is a finished command; a non-zero exit code is a result, not an error.
	ExecResult = backend.ExecResult
	// ExecError carries the partial result of an exec that timed out, hit a strict output
	// limit, could not run, or was cancelled.
	ExecError = backend.ExecError
	// Process is a streaming exec: Events yields output chunks as they arrive; Poll, Wait and
	// Kill behave like a local process's.
	Process = backend.Process
	// StreamEvent is one chunk of a streaming exec's output.
	StreamEvent = backend.Event
	// WindowSize is a terminal's size, for an ExecRequest with TTY (its Size, and each change
	// sent on its Resize hook).
	WindowSize = backend.WindowSize
)

// Output streams of a StreamEvent.
const (
	StreamStdout = backend.Stdout
	StreamStderr = backend.Stderr
)

// DefaultReadLimit is ReadFile's limit: 100 MiB. A larger file is ErrOutputLimit.
const DefaultReadLimit = 100 << 20

// Sandbox is one service of a live sample: a running container that exec and file calls are
// routed to, straight over the Engine API. Its identity is immutable; it is safe for
// concurrent use.
type Sandbox struct {
	project   string
	service   string
	container string
	isDefault bool
	target    backend.Target
	// io is the backend the container lives on.
	io backend.Backend
	o  *Orchestrator
	// execs bounds exec and file calls orchestrator-wide (nil: unbounded).
	execs *gate
	// calls are the calls in flight on the sample's sandboxes, which its cleanup stops.
	calls *calls
}

func (o *Orchestrator) newSandbox(s *Sample, service, containerID, name, workingDir, user string, isDefault bool) *Sandbox {
	return &Sandbox{
		project: s.project, service: service, container: name, isDefault: isDefault, execs: o.execs, calls: s.calls,
		io: o.backend, o: o,
		target: backend.Target{Container: containerID, Service: service, WorkingDir: workingDir, User: user},
	}
}

// Service is the compose service name.
func (b *Sandbox) Service() string { return b.service }

// Project is the sample's compose project name.
func (b *Sandbox) Project() string { return b.project }

// ContainerID and ContainerName identify the service's container.
func (b *Sandbox) ContainerID() string   { return b.target.Container }
func (b *Sandbox) ContainerName() string { return b.container }

// WorkingDir is the container's working directory ("/" when the image sets none); relative
// paths in exec and file calls resolve against it.
func (b *Sandbox) WorkingDir() string { return b.target.WorkingDir }

// User is the container's default user ("" means the image's, root when unset). Execs run as
// it and files are written as it unless a call says otherwise.
func (b *Sandbox) User() string { return b.target.User }

// IsDefault reports whether this is the sample's default service.
func (b *Sandbox) IsDefault() bool { return b.isDefault }

// Exec runs req (an argv, no implicit shell) and waits for it. On timeout the command and every
// process it started are killed inside the container, and the error is ErrTimeout with the
// partial output in its *ExecError. A stopped or removed container is ErrUnavailable.
func (b *Sandbox) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	ctx, end, err := b.begin(ctx, execOp(req.Cmd), "")
	if err != nil {
		return ExecResult{}, err
	}
	defer end()
	return b.io.Exec(ctx, b.target, req)
}

// ExecDetached starts req in the background, as `docker exec -d` does, and returns the
// engine's exec id once the command runs. Nothing waits for it: it outlives the call, and the
// sample's cleanup ends it with its container. A command that cannot start is an *ExecError
// with exit code 127 (not found) or 126 (cannot run) and the reason in its Result's Stderr.
func (b *Sandbox) ExecDetached(ctx context.Context, req ExecRequest) (string, error) {
	ctx, end, err := b.begin(ctx, execOp(req.Cmd), "")
	if err != nil {
		return "", err
	}
	defer end()
	x, ok := backend.AsDetachedExecer(b.io)
	if !ok {
		return "", backend.Lacks("exec detached in "+b.service, b.io, "backend.DetachedExecer")
	}
	return x.ExecDetached(ctx, b.target, req)
}

// ExecStream starts req and returns at once; its Events arrive as the command writes them.
// Cancelling ctx or calling Kill kills the command like a timeout. An unread stream never
// blocks the command: Events drops what its buffer cannot hold (see StreamEvent.Dropped),
// and Wait's result keeps the tail of each stream, as Exec's does.
func (b *Sandbox) ExecStream(ctx context.Context, req ExecRequest) (*Process, error) {
	ctx, end, err := b.begin(ctx, execOp(req.Cmd), "")
	if err != nil {
		return nil, err
	}
	p, err := b.io.ExecStream(ctx, b.target, req)
	if err != nil {
		end()
		return nil, err
	}
	// The slot and the registration are the command's until it ends, not until ExecStream
	// returns; the command always ends (an unread stream never blocks it).
	go func() { <-p.Done(); end() }()
	return p, nil
}

// ReadFile returns the file's bytes, following symlinks, up to DefaultReadLimit (past it:
// ErrOutputLimit, enforced while streaming). A relative path resolves against WorkingDir.
// Errors carry the path: ErrNotFound, ErrIsDirectory, ErrPermission, ErrOutputLimit.
func (b *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	ctx, end, err := b.begin(ctx, "read", path)
	if err != nil {
		return nil, err
	}
	defer end()
	return backend.ReadFile(ctx, b.io, b.target, path, DefaultReadLimit)
}

// ReadFileTo streams the file to w, holding no copy of it, and returns the bytes written.
// limit 0 means DefaultReadLimit, and a negative limit none (w then takes any size). A w that
// blocks does not hold the call past ctx.
func (b *Sandbox) ReadFileTo(ctx context.Context, path string, w io.Writer, limit int64) (int64, error) {
	if limit == 0 {
		limit = DefaultReadLimit
	}
	ctx, end, err := b.begin(ctx, "read", path)
	if err != nil {
		return 0, err
	}
	defer end()
	return b.io.ReadFileTo(ctx, b.target, path, w, limit)
}

// ReadDirTo streams the directory at path into w as a tar archive of its contents, made by tar
// inside the container as the sandbox's user (symlinks stay symlinks). The archive is the
// sandbox's: unpack it on the host with care (the CLI's cp never lets it write outside its
// destination). Errors carry the path: ErrNotFound (also when it is not a directory),
// ErrPermission.
func (b *Sandbox) ReadDirTo(ctx context.Context, path string, w io.Writer) error {
	ctx, end, err := b.begin(ctx, "read directory", path)
	if err != nil {
		return err
	}
	defer end()
	return b.io.ReadDirTo(ctx, b.target, path, w)
}

// WriteDirFrom unpacks the tar archive read from r into the directory at path, creating it
// when missing and merging into it when present, as the sandbox's user.
func (b *Sandbox) WriteDirFrom(ctx context.Context, path string, r io.Reader) error {
	ctx, end, err := b.begin(ctx, "write directory", path)
	if err != nil {
		return err
	}
	defer end()
	return b.io.WriteDirFrom(ctx, b.target, path, r)
}

// WriteFile creates or replaces the file, creating missing parent directories, as the
// sandbox's user (so the file is owned by that user, and a non-root user gets ErrPermission
// where it may not write).
func (b *Sandbox) WriteFile(ctx context.Context, path string, data []byte) error {
	ctx, end, err := b.begin(ctx, "write", path)
	if err != nil {
		return err
	}
	defer end()
	return backend.WriteFile(ctx, b.io, b.target, path, data)
}

// WriteFileFrom is WriteFile streaming size bytes from r. An r that blocks does not hold the
// call past ctx.
func (b *Sandbox) WriteFileFrom(ctx context.Context, path string, r io.Reader, size int64) error {
	ctx, end, err := b.begin(ctx, "write", path)
	if err != nil {
		return err
	}
	defer end()
	return b.io.WriteFileFrom(ctx, b.target, path, r, size)
}

// begin admits one call: it registers it with the sample, whose cleanup then stops it, and
// takes an exec slot when execs are bounded. end releases both.
func (b *Sandbox) begin(ctx context.Context, op, path string) (context.Context, func(), error) {
	end := noRelease
	if b.calls != nil {
		cctx, done, err := b.calls.enter(ctx, strings.TrimSpace(op+" "+path), b.project)
		if err != nil {
			return nil, nil, err
		}
		ctx, end = cctx, done
	}
	release, err := b.execSlot(ctx, op, path)
	if err != nil {
		end()
		return nil, nil, err
	}
	return ctx, func() { release(); end() }, nil
}

// execOp names an exec in error messages by its argv[0].
func execOp(cmd []string) string {
	if len(cmd) == 0 {
		return "exec"
	}
	return "exec " + cmd[0]
}

// Port is a published port, as Connection reports it.
type Port = backend.Port

// Connection tells a person or a tool how to reach a running service.
type Connection struct {
	ContainerID   string `json:"container_id"`
	ContainerName string `json:"container_name"`
	// Command enters the container, as its backend says (Docker: `docker exec -it <name>
	// bash -l` when bash exists, else sh, with --user when the sandbox has one).
	Command string `json:"command"`
	Ports   []Port `json:"ports"`
}

// Connection describes how to reach the service: its container, a shell command to enter it,
// and its published ports, as the engine bound them (127.0.0.1 unless the task opted in to
// public ports and named another address).
func (b *Sandbox) Connection(ctx context.Context) (Connection, error) {
	info, err := b.io.Inspect(ctx, b.target.Container)
	if err != nil {
		return Connection{}, fmt.Errorf("connection to %s: %w", b.service, err)
	}
	c := Connection{ContainerID: info.ID, ContainerName: info.Name, Ports: info.Ports}
	shell := "sh"
	if r, err := b.Exec(ctx, ExecRequest{Cmd: []string{"test", "-x", "/bin/bash"}}); err == nil && r.ExitCode == 0 {
		shell = "bash -l"
	}
	if sh, ok := backend.AsShell(b.io); ok {
		c.Command = sh.ShellCommand(info, b.target.User, shell)
	}
	return c, nil
}
