package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

type execOptions struct {
	Project string
	Service string
	User    string
	Workdir string
	Env     []string
	Timeout time.Duration
	Stdin   bool
	// Detach starts the command in the background and returns at once.
	Detach bool
	// NoTTY is compose's -T, accepted as the default it already is.
	NoTTY bool
	// TTY runs the command on a pseudo-terminal (-t); with -i on a terminal, that terminal is
	// put in raw mode and its size follows the window's.
	TTY bool
}

func newExecCmd(g *globals) *cobra.Command {
	var opts execOptions
	cmd := &cobra.Command{
		Use:   "exec -p PROJECT [-s SERVICE] [flags] CMD [ARG...]",
		Short: "Run a command in a sample's service",
		Long: `Runs CMD (no implicit shell) in SERVICE (default: the sample's default service) over the Engine
API, and exits with its exit code: 124 when --timeout passed (the command and its children are
killed), 126 when it cannot run, 127 when it is not found; why it could not run is printed on
stderr. Flags end at CMD, so 'exec -p P ls -la /' passes -la to ls ('--' before CMD also works).
-d starts CMD in the background and returns at once. -t gives CMD a terminal; with -i and a
terminal on stdin, that terminal goes raw (Ctrl-C reaches CMD) and window-size changes follow.
COMPOSEBOX_PROJECT stands in for -p.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := projectOf("exec", opts.Project)
			if err != nil {
				return err
			}
			opts.Project = p
			if opts.Detach && (opts.Stdin || opts.TTY) {
				return usageError{errors.New("exec: -d does not go with -i or -t (a background command has no terminal or stdin)")}
			}
			if opts.TTY && opts.NoTTY {
				return usageError{errors.New("exec: -t and -T contradict each other")}
			}
			if opts.TTY && g.JSON {
				return usageError{errors.New("exec: -t does not go with --json (a terminal's output is for a person)")}
			}
			return runExec(cmd.Context(), g, opts, args)
		},
	}
	// Everything from CMD on is CMD's, as in docker compose exec.
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.StringVarP(&opts.Service, "service", "s", "", "service (default: the sample's default service)")
	f.StringVarP(&opts.User, "user", "u", "", "user: name or uid[:gid]")
	f.StringVarP(&opts.Workdir, "workdir", "w", "", "working directory (relative: against the container's)")
	f.StringArrayVarP(&opts.Env, "env", "e", nil, "environment variable K=V (repeatable)")
	secondsVar(f, &opts.Timeout, "timeout", 0, "kill the command and its children after this long, e.g. 30s or 30 (exit 124)")
	f.BoolVarP(&opts.Stdin, "interactive", "i", false, "forward stdin to the command")
	f.BoolVarP(&opts.Detach, "detach", "d", false, "run the command in the background and return at once")
	f.BoolVarP(&opts.NoTTY, "no-tty", "T", false, "no TTY (the default; accepted as docker compose exec takes it)")
	f.BoolVarP(&opts.TTY, "tty", "t", false, "run the command on a pseudo-terminal (with -i: an interactive shell, e.g. exec -it -p P sh)")
	return cmd
}

// openSandbox finds a live sample's service from labels alone.
func openSandbox(ctx context.Context, g *globals, project, service string) (*orchestrator.Sandbox, func(), error) {
	o, err := g.bareOrchestrator()
	if err != nil {
		return nil, nil, err
	}
	s, err := o.Open(ctx, project)
	if err != nil {
		o.Close()
		return nil, nil, err
	}
	sb := s.Default()
	if service != "" {
		if sb, err = s.Sandbox(service); err != nil {
			o.Close()
			return nil, nil, err
		}
	}
	return sb, func() { o.Close() }, nil
}

func runExec(ctx context.Context, g *globals, opts execOptions, argv []string) error {
	req := orchestrator.ExecRequest{Cmd: argv, User: opts.User, Cwd: opts.Workdir, Timeout: opts.Timeout}
	if len(opts.Env) > 0 {
		req.Env = map[string]string{}
		for _, kv := range opts.Env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageError{fmt.Errorf("exec: -e %q: want K=V", kv)}
			}
			req.Env[k] = v
		}
	}
	if opts.Stdin {
		// Streamed as the command reads it: an interactive pipe or a large file both work.
		req.StdinReader = g.stdin
	}
	sb, done, err := openSandbox(ctx, g, opts.Project, opts.Service)
	if err != nil {
		return err
	}
	defer done()
	if opts.Detach {
		return g.execDetached(ctx, sb, req)
	}
	if opts.TTY {
		restore, err := g.terminal(&req, opts.Stdin)
		if err != nil {
			return err
		}
		defer restore()
	}
	if g.JSON {
		res, err := sb.Exec(ctx, req)
		return g.execOutcome(res, err, false)
	}
	return g.streamExec(ctx, sb, req)
}

// execDetachedJSON is the JSON shape of exec -d.
type execDetachedJSON struct {
	Detached bool   `json:"detached"`
	ExecID   string `json:"exec_id"`
}

// execDetached starts the command in the background; a command that cannot start fails here
// as it would in the foreground.
func (g *globals) execDetached(ctx context.Context, sb *orchestrator.Sandbox, req orchestrator.ExecRequest) error {
	id, err := sb.ExecDetached(ctx, req)
	if err != nil {
		var ee *orchestrator.ExecError
		if errors.As(err, &ee) {
			return g.execOutcome(ee.Result, nil, false)
		}
		return err
	}
	g.setResult(execDetachedJSON{Detached: true, ExecID: id}, nil)
	return nil
}

// streamExec forwards the command's output as it arrives and returns its outcome.
func (g *globals) streamExec(ctx context.Context, sb *orchestrator.Sandbox, req orchestrator.ExecRequest) error {
	// Through the exec's writers, not its Events: a slow terminal or pipe holds the command
	// back instead of losing output.
	req.Stdout, req.Stderr = g.stdout, g.stderr
	res, err := sb.Exec(ctx, req)
	return g.execOutcome(res, err, true)
}

// execJSON is the JSON shape of exec (and run) with --json: a fixed surface that scripts parse.
// Output that is valid UTF-8 is text in stdout and stderr; output that is not is left out of
// them and given, bytes unchanged, as base64 in stdout_base64 and stderr_base64 (as the server
// gives output), so that a script tells them apart by the member present.
type execJSON struct {
	// Project is the sample run started, for run; exec leaves it out.
	Project string `json:"project,omitempty"`
	// ExitCode is the process's exit code: the command's, or 124 when --timeout killed it.
	ExitCode        int     `json:"exit_code"`
	Stdout          *string `json:"stdout,omitempty"`
	StdoutBase64    []byte  `json:"stdout_base64,omitempty"`
	Stderr          *string `json:"stderr,omitempty"`
	StderrBase64    []byte  `json:"stderr_base64,omitempty"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
}

// outputJSON is b as text when it is valid UTF-8, else as bytes for base64.
func outputJSON(b []byte) (*string, []byte) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	return nil, b
}

// execOutcome records a finished exec as the result (its output too, unless it was streamed
// as it arrived) and turns it into the process exit code.
func (g *globals) execOutcome(res orchestrator.ExecResult, err error, streamed bool) error {
	return g.execOutcomeOf("", res, err, streamed)
}

func (g *globals) execOutcomeOf(project string, res orchestrator.ExecResult, err error, streamed bool) error {
	var ee *orchestrator.ExecError
	if errors.As(err, &ee) {
		res = ee.Result
	}
	var outcome error
	switch {
	case err == nil:
		if res.ExitCode != 0 {
			outcome = exitError{code: res.ExitCode, silent: true}
		}
	case errors.Is(err, errdefs.ErrTimeout):
		outcome = exitError{code: exitTimeout, err: err}
	case errors.Is(err, errdefs.ErrPermission) && ee != nil:
		outcome = exitError{code: exitCannotRun, err: err}
	default:
		outcome = err
	}
	if err == nil || ee != nil {
		var text func(io.Writer) error
		if !streamed {
			text = func(w io.Writer) error {
				_, _ = g.stderr.Write(res.Stderr)
				_, err := w.Write(res.Stdout)
				return err
			}
		}
		// One exit code: the one the process exits with (a command killed by --timeout died
		// of SIGKILL, 137, but composebox exits 124).
		doc := execJSON{Project: project, ExitCode: exitCode(outcome),
			StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
		doc.Stdout, doc.StdoutBase64 = outputJSON(res.Stdout)
		doc.Stderr, doc.StderrBase64 = outputJSON(res.Stderr)
		g.setResult(doc, text)
	}
	return outcome
}
