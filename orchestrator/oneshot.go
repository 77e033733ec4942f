package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
)

// RunOptions tune a one-shot Run. The zero value runs the command with the spec's setup, no
// stdin and no timeout but ctx's.
type RunOptions struct {
	// SpawnOptions are the per-run additions to the spec (id, mounts, ports, env) and the
	// setup and readiness settings, as for a session.
	SpawnOptions

	// Timeout, when positive, kills the command (and every process it started) once it
	// passes: Run returns ErrTimeout with the partial output, and the container is removed.
	Timeout time.Duration
	// Stdin is written to the command.
	Stdin []byte
	// Cwd, User and OutputLimit are as in ExecRequest.
	Cwd         string
	User        string
	OutputLimit int
	// Stdout and Stderr, when set, receive the command's output as it arrives; the result
	// still holds it (up to OutputLimit).
	Stdout, Stderr io.Writer
}

// RunResult is a finished one-shot command. A non-zero ExitCode is a result, not an error.
type RunResult struct {
	ExecResult
	// SetupStdout and SetupStderr are the setup commands' output, apart from the command's.
	SetupStdout, SetupStderr []byte
	// Project is the compose project the run used (removed by the time Run returns).
	Project string
}

// Run is a one-shot command in a fresh container of spec (what harnesses do with `docker run
// --rm`): create, exec, remove. The workspace is bind-mounted, so the command's file edits
// land on the host. The container is removed however the command ends: exit, Timeout (which
// returns ErrTimeout), or cancellation of ctx (which kills the command first). Errors from
// the command are *ExecError carrying the partial result, which Run also returns.
func (o *Orchestrator) Run(ctx context.Context, spec ContainerSpec, cmd []string, opts RunOptions) (res RunResult, err error) {
	if len(cmd) == 0 {
		return res, errdefs.New(errdefs.ErrInvalidConfig, "run: empty command")
	}
	s, err := o.Spawn(ctx, spec, opts.SpawnOptions)
	if err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			res.SetupStdout, res.SetupStderr = se.SetupStdout, se.SetupStderr
		}
		return res, fmt.Errorf("run: %w", err)
	}
	res.Project = s.Project()
	res.SetupStdout, res.SetupStderr = s.setupStdout, s.setupStderr
	defer func() {
		// Detached inside: the container goes even when ctx was cancelled.
		if cerr := s.Cleanup(ctx); cerr != nil {
			if err == nil {
				err = cerr
			} else {
				o.cfg.log.Warn("run: cleanup", "project", res.Project, "err", cerr)
			}
		}
	}()
	// The writers get the output as it arrives, every byte of it; the result keeps the tail.
	req := ExecRequest{Cmd: cmd, Stdin: opts.Stdin, Cwd: opts.Cwd, User: opts.User, Timeout: opts.Timeout, OutputLimit: opts.OutputLimit, Stdout: opts.Stdout, Stderr: opts.Stderr}
	r, err := s.Exec(ctx, req)
	res.ExecResult = resultOf(r, err)
	return res, err
}

// resultOf is the result of an exec, the partial one when it failed.
func resultOf(r ExecResult, err error) ExecResult {
	var ee *ExecError
	if errors.As(err, &ee) {
		return ee.Result
	}
	return r
}
