package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// Exec types, shared with the Engine API layer.
type (
	// ExecRequest is one command: argv (no implicit shell), stdin, cwd, env, user, timeout and
	// output caps. The zero value of every field but Cmd is the default.
	ExecRequest = sandboxio.ExecRequest
	// ExecResult is a finished command; a non-zero exit code is a result, not an error.
	ExecResult = sandboxio.ExecResult
	// ExecError carries the partial result of an exec that timed out, hit a strict output
	// limit, could not run, or was cancelled.
	ExecError = sandboxio.ExecError
	// Process is a streaming exec: Events yields output chunks as they arrive; Poll, Wait and
	// Kill behave like a local process's.
	Process = sandboxio.Process
	// StreamEvent is one chunk of a streaming exec's output.
	StreamEvent = sandboxio.Event
)

// Output streams of a StreamEvent.
const (
	StreamStdout = sandboxio.Stdout
	StreamStderr = sandboxio.Stderr
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
	target    sandboxio.Target
	// execs bounds exec and file calls orchestrator-wide (nil: unbounded).
	execs *gate
	// calls are the calls in flight on the sample's sandboxes, which its cleanup stops.
	calls *calls
}

func (o *Orchestrator) newSandbox(s *Sample, service, containerID, name, workingDir, user string, isDefault bool) *Sandbox {
	return &Sandbox{
		project: s.project, service: service, container: name, isDefault: isDefault, execs: o.execs, calls: s.calls,
		// The raw client, not the engine's retrying one: an exec is never retried implicitly.
		target: sandboxio.Target{Client: o.client, Container: containerID, Service: service, WorkingDir: workingDir, User: user},
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
	return sandboxio.Exec(ctx, b.target, req)
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
	p, err := sandboxio.ExecStream(ctx, b.target, req)
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
	return sandboxio.ReadFile(ctx, b.target, path, DefaultReadLimit)
}

// ReadFileTo streams the file to w, holding no copy of it, and returns the bytes written.
// limit <= 0 means DefaultReadLimit. A w that blocks does not hold the call past ctx.
func (b *Sandbox) ReadFileTo(ctx context.Context, path string, w io.Writer, limit int64) (int64, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	ctx, end, err := b.begin(ctx, "read", path)
	if err != nil {
		return 0, err
	}
	defer end()
	return sandboxio.ReadFileTo(ctx, b.target, path, w, limit)
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
	return sandboxio.WriteFile(ctx, b.target, path, data)
}

// WriteFileFrom is WriteFile streaming size bytes from r. An r that blocks does not hold the
// call past ctx.
func (b *Sandbox) WriteFileFrom(ctx context.Context, path string, r io.Reader, size int64) error {
	ctx, end, err := b.begin(ctx, "write", path)
	if err != nil {
		return err
	}
	defer end()
	return sandboxio.WriteFileFrom(ctx, b.target, path, r, size)
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
type Port struct {
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
}

// Connection tells a person or a tool how to reach a running service.
type Connection struct {
	ContainerID   string `json:"container_id"`
	ContainerName string `json:"container_name"`
	// Command enters the container: `docker exec -it <name> bash -l` when bash exists, else
	// sh, with --user when the sandbox has one.
	Command string `json:"command"`
	Ports   []Port `json:"ports"`
}

// Connection describes how to reach the service: its container, a shell command to enter it,
// and its published ports, as the engine bound them (127.0.0.1 unless the task opted in to
// public ports and named another address).
func (b *Sandbox) Connection(ctx context.Context) (Connection, error) {
	info, err := b.target.Client.ContainerInspect(ctx, b.target.Container)
	if err != nil {
		return Connection{}, fmt.Errorf("connection to %s: %w", b.service, err)
	}
	c := Connection{ContainerID: info.ID, ContainerName: strings.TrimPrefix(info.Name, "/")}
	shell := "sh"
	if r, err := b.Exec(ctx, ExecRequest{Cmd: []string{"test", "-x", "/bin/bash"}}); err == nil && r.ExitCode == 0 {
		shell = "bash -l"
	}
	user := ""
	if b.target.User != "" {
		user = " --user " + b.target.User
	}
	c.Command = fmt.Sprintf("docker exec -it%s %s %s", user, c.ContainerName, shell)
	if info.NetworkSettings != nil {
		for port, bindings := range info.NetworkSettings.Ports {
			for _, pb := range bindings {
				hp, _ := strconv.Atoi(pb.HostPort)
				c.Ports = append(c.Ports, Port{ContainerPort: port.Int(), Protocol: port.Proto(), HostIP: pb.HostIP, HostPort: hp})
			}
		}
	}
	slices.SortFunc(c.Ports, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.ContainerPort, b.ContainerPort), cmp.Compare(a.Protocol, b.Protocol))
	})
	return c, nil
}
