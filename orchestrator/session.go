package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/internal/errdefs"
)

// SpawnOptions are what one session adds to its spec. The zero value adds nothing and runs
// the spec's setup commands.
type SpawnOptions struct {
	// ID identifies the session's sample in labels (default: a random short id).
	ID string
	// Mounts are per-spawn mounts, above the spec's: one at the same container path replaces
	// the spec's. Only assets override them.
	Mounts []Mount
	// Ports are per-spawn ports, replacing the spec's for the same container port.
	Ports []PublishedPort
	// Env is per-spawn environment, over the spec's.
	Env map[string]string
	// DisableSetup skips the spec's setup commands, e.g. when resuming from a snapshot in
	// which they already ran.
	DisableSetup bool
	// SetupTimeout bounds each setup command (0: no bound but ctx).
	SetupTimeout time.Duration
	// ReadyTimeout overrides the readiness budget of the container.
	ReadyTimeout time.Duration
}

// Session is a live single-container sandbox: one keep-alive container that
// any number of commands are exec'd into, until Cleanup removes it. A Session is a sample of a
// one-service task, so it goes through the same lifecycle, exec and cleanup as any other
// sample. It is safe for concurrent use. Cleanup is final: afterwards every call fails with
// ErrUnavailable, and a new session needs a new Spawn.
type Session struct {
	task    *Task
	sample  *Sample
	sandbox *Sandbox

	setupStdout, setupStderr []byte

	mu     sync.Mutex
	closed bool
	last   *Process // the latest command started with Start

	// cleanupMu serialises Cleanup calls; cleaned is set once one succeeded.
	cleanupMu sync.Mutex
	cleaned   bool
}

// Spawn starts a session: it turns spec into a one-service project, checks it (a dangerous
// extra arg or mount fails here, before anything starts), initialises it as a task, starts its
// one sample, and runs the spec's setup commands in it unless opts.DisableSetup. Their output
// is kept apart from every command's (SetupStdout, SetupStderr). A setup command that fails
// fails the spawn with a *SetupError carrying its output, and leaves nothing behind; so does
// any other failure, and cancellation.
func (o *Orchestrator) Spawn(ctx context.Context, spec ContainerSpec, opts SpawnOptions) (*Session, error) {
	task, err := o.containerTask(ctx, spec, containerSpawn{mounts: opts.Mounts, ports: opts.Ports, env: opts.Env, readyTimeout: opts.ReadyTimeout})
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	sample, err := task.SampleInit(ctx, SampleSpec{ID: opts.ID})
	if err != nil {
		if cerr := task.Cleanup(ctx); cerr != nil {
			o.cfg.log.Warn("spawn: cleanup after failed start", "task", task.Name(), "err", cerr)
		}
		return nil, fmt.Errorf("spawn: %w", err)
	}
	s := &Session{task: task, sample: sample, sandbox: sample.Default()}
	if !opts.DisableSetup && len(spec.Setup) > 0 {
		if err := s.setup(ctx, spec.Setup, opts.SetupTimeout); err != nil {
			if cerr := s.Cleanup(ctx); cerr != nil {
				o.cfg.log.Warn("spawn: cleanup after failed setup", "project", sample.Project(), "err", cerr)
			}
			return nil, fmt.Errorf("spawn %s: %w", sample.Project(), err)
		}
	}
	return s, nil
}

// SetupError is a setup command that failed (exited non-zero, timed out, or could not run). It
// carries the setup output so far, the failed command's included. It matches ErrUnavailable
// (the sandbox could not be prepared), or the exec's own category (ErrTimeout, say) when the
// command did not finish.
type SetupError struct {
	// Index is the failed command's position in ContainerSpec.Setup, from 0.
	Index    int
	Command  string
	ExitCode int
	// SetupStdout and SetupStderr are the output of every setup command run.
	SetupStdout, SetupStderr []byte
	// Err is the exec's error when the command did not finish; nil when it exited non-zero.
	Err error
}

func (e *SetupError) Error() string {
	what := fmt.Sprintf("exited %d", e.ExitCode)
	if e.Err != nil {
		what = e.Err.Error()
	}
	msg := fmt.Sprintf("setup command %d (%q) %s", e.Index+1, e.Command, what)
	if tail := lastLines(e.SetupStderr, 20); tail != "" {
		msg += "; stderr: " + tail
	}
	return msg
}

func (e *SetupError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Err}
	}
	return []error{errdefs.ErrUnavailable}
}

// setup runs each command with sh -c as the container's user in its workdir, stopping at the
// first failure.
func (s *Session) setup(ctx context.Context, cmds []string, timeout time.Duration) error {
	var stdout, stderr bytes.Buffer
	for i, c := range cmds {
		res, err := s.sandbox.Exec(ctx, ExecRequest{Cmd: []string{"sh", "-c", c}, Timeout: timeout})
		stdout.Write(res.Stdout)
		stderr.Write(res.Stderr)
		if err != nil || res.ExitCode != 0 {
			return &SetupError{Index: i, Command: c, ExitCode: res.ExitCode, SetupStdout: stdout.Bytes(), SetupStderr: stderr.Bytes(), Err: err}
		}
	}
	s.setupStdout, s.setupStderr = stdout.Bytes(), stderr.Bytes()
	return nil
}

// lastLines is the end of b, at most n lines, trimmed, for error messages.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// Sandbox is the session's container, for everything a Sandbox offers (Connection, say).
// Calls on it after Cleanup fail with ErrUnavailable from the engine.
func (s *Session) Sandbox() *Sandbox { return s.sandbox }

// Project is the session's compose project name.
func (s *Session) Project() string { return s.sample.Project() }

// SetupStdout and SetupStderr are the output of the setup commands run at Spawn (empty with
// DisableSetup), kept apart from every command's output.
func (s *Session) SetupStdout() []byte { return bytes.Clone(s.setupStdout) }
func (s *Session) SetupStderr() []byte { return bytes.Clone(s.setupStderr) }

// open fails once the session is cleaned up.
func (s *Session) open(op string) error {
	if s.closed {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s in session %s: the session is cleaned up; spawn a new one", op, s.sample.Project()))
	}
	return nil
}

// Exec runs a command in the session's container and waits for it, like Sandbox.Exec.
func (s *Session) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	s.mu.Lock()
	err := s.open(sessionOp(req.Cmd))
	s.mu.Unlock()
	if err != nil {
		return ExecResult{}, err
	}
	return s.sandbox.Exec(ctx, req)
}

// Start starts a command and returns its process at once: its Events
// arrive as the command writes them; Poll, Wait and Kill act like a local process's.
// Cancelling ctx kills it. The session's Poll and Kill act on the latest command started.
func (s *Session) Start(ctx context.Context, req ExecRequest) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(sessionOp(req.Cmd)); err != nil {
		return nil, err
	}
	p, err := s.sandbox.ExecStream(ctx, req)
	if err != nil {
		return nil, err
	}
	s.last = p
	return p, nil
}

// Poll is nil while the latest command started with Start runs (or when
// none was started), and its exit code once it has finished.
func (s *Session) Poll() *int {
	s.mu.Lock()
	p := s.last
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Poll()
}

// Kill kills the latest command started with Start, and every process it started, and waits
// until that is done or ctx ends. The container stays: Cleanup removes it.
func (s *Session) Kill(ctx context.Context) error {
	s.mu.Lock()
	p := s.last
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Kill(ctx)
}

// ReadFile reads a file of the container, like Sandbox.ReadFile.
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	s.mu.Lock()
	err := s.open("read " + path)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.sandbox.ReadFile(ctx, path)
}

// WriteFile writes a file in the container, like Sandbox.WriteFile.
func (s *Session) WriteFile(ctx context.Context, path string, data []byte) error {
	s.mu.Lock()
	err := s.open("write " + path)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.sandbox.WriteFile(ctx, path, data)
}

// Cleanup kills every command still running in the session, removes the container and
// forgets the task. It is final: afterwards every call fails with ErrUnavailable. It runs on a
// context of its own, detached from ctx and bounded by opts' Timeout (default 2 minutes), so
// it works after ctx is cancelled. A Cleanup that failed is retried by the next call; after
// one that succeeded, calls do nothing.
func (s *Session) Cleanup(ctx context.Context, opts ...CleanupOptions) error {
	s.cleanupMu.Lock()
	defer s.cleanupMu.Unlock()
	if s.cleaned {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	dctx, cancel := teardownContext(ctx, opts...)
	defer cancel()
	var errs *multierror.Error
	if err := s.sample.cleanup(dctx); err != nil {
		errs = multierror.Append(errs, err)
	}
	if err := s.task.cleanup(dctx); err != nil {
		errs = multierror.Append(errs, err)
	}
	if err := errs.ErrorOrNil(); err != nil {
		return fmt.Errorf("cleanup session %s: %w", s.sample.Project(), err)
	}
	s.cleaned = true
	return nil
}

// sessionOp names an exec in error messages by its argv[0].
func sessionOp(cmd []string) string {
	if len(cmd) == 0 {
		return "exec"
	}
	return "exec " + cmd[0]
}
