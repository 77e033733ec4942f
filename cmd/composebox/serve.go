package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/composebox/composebox/api"
	"github.com/composebox/composebox/compose"
)

type serveOptions struct {
	Socket       string
	Listen       string
	TokenFile    string
	LeaseTTL     time.Duration
	MaxPerLease  int
	Keep         bool
	Reaper       bool
	DrainTimeout time.Duration
	StdinEOF     bool
	// Ceiling is what requests may ask for: the policy flags of a task (with --pass-env),
	// read as the most a request may name, and TaskRoots.
	Ceiling   taskFlags
	TaskRoots []string
}

func newServeCmd(g *globals) *cobra.Command {
	var opts serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the orchestrator over HTTP for runners in other languages",
		Long: `Serves the composebox API (HTTP/1.1 + JSON, described by /v1/openapi.json) until SIGTERM or
SIGINT. It listens on a Unix socket (mode 0600) by default, or with --listen on loopback TCP, where
every request needs the bearer token written to --token-file. Once it accepts requests it prints
one line saying where (with --json, a JSON object). On SIGTERM it drains the requests in flight,
removes every sample and task it owns unless --keep, and exits 0.

What a request may ask for is the operator's to set: --allow, --allow-cap, --allow-mount-root,
--policy and --pass-env are the most a request's policy and pass_env may name (a request gets
only what it names), and --task-root the directories its working_dir, path and files may be
in. Anything beyond is policy_violation, naming the flag that would allow it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, g, opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Socket, "socket", "", "Unix socket to listen on (default $XDG_RUNTIME_DIR/composebox/api.sock, else /run/composebox/api.sock)")
	f.StringVar(&opts.Listen, "listen", "", "listen on loopback TCP instead, 127.0.0.1:PORT (PORT 0: any free port); requires a bearer token")
	f.StringVar(&opts.TokenFile, "token-file", "", "where --listen writes its bearer token (default: serve.token in the state directory)")
	f.DurationVar(&opts.LeaseTTL, "lease-ttl", api.DefaultLeaseTTL, "how long a lease lives without a heartbeat before its samples and tasks are removed")
	f.IntVar(&opts.MaxPerLease, "max-per-lease", api.DefaultMaxPerLease, "requests one lease may run at once (past it: busy, 429)")
	f.BoolVar(&opts.Keep, "keep", false, "on exit, leave the samples in place (stale, for 'composebox cleanup --stale') instead of removing them")
	f.BoolVar(&opts.Reaper, "reaper", false, "start a watchdog that removes the server's samples if it dies without cleaning up")
	f.DurationVar(&opts.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long requests in flight may take before they are cut")
	registerCeiling(f, &opts.Ceiling, &opts.TaskRoots)
	f.BoolVar(&opts.StdinEOF, "stop-on-stdin-eof", false, "also stop (as on SIGTERM) when stdin reaches its end: a parent that holds a pipe to stdin takes the server with it when it dies, even by SIGKILL")
	return cmd
}

// registerCeiling registers serve's ceiling flags: the policy flags of a task, read as what
// requests may ask for, and --task-root.
func registerCeiling(fs *pflag.FlagSet, f *taskFlags, roots *[]string) {
	fs.StringArrayVar(&f.Allow, "allow", nil, "let a request's policy ask for opt-in KIND (repeatable): "+strings.Join(compose.AllowKinds(), ", "))
	fs.StringArrayVar(&f.AllowCaps, "allow-cap", nil, "let a request's policy ask for this capability beyond Docker's default set (repeatable; ALL for any)")
	fs.StringArrayVar(&f.MountRoots, "allow-mount-root", nil, "let a request's policy name mount roots within DIR (repeatable)")
	fs.StringVar(&f.PolicyFile, "policy", "", "policy file (YAML, the fields of compose.Policy): its opt-ins, capabilities and roots bound what requests may ask for, its limits hold for every task; the flags add to it")
	fs.StringArrayVar(&f.Egress, "egress", nil, "let every task reach at most NAME[:PORT] (repeatable; a request's policy.egress narrows it)")
	fs.StringVar(&f.EgressDNS, "egress-resolver", "", "resolver ADDR[:PORT] the egress gateways resolve allowed names through")
	fs.StringArrayVar(&f.PassEnv, "pass-env", nil, "let a request's pass_env name this variable of the server's environment (repeatable)")
	fs.StringArrayVar(roots, "task-root", nil, "let requests take tasks (working_dir, path, files) from within DIR (repeatable); without it a request gives no working_dir")
}

// ceiling is the api.Ceiling the flags set. The server's state directory and token file are
// never a request's to name.
func (opts serveOptions) ceiling(g *globals, tokenFile string) (api.Ceiling, error) {
	p, err := opts.Ceiling.policy()
	if err != nil {
		return api.Ceiling{}, err
	}
	c := api.Ceiling{Policy: p, PassEnv: opts.Ceiling.PassEnv, Refused: []string{g.stateDir()}}
	if tokenFile != "" {
		c.Refused = append(c.Refused, tokenFile)
	}
	for _, r := range opts.TaskRoots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return c, usageError{fmt.Errorf("--task-root %s: %w", r, err)}
		}
		c.TaskRoots = append(c.TaskRoots, abs)
	}
	if err := c.Check(); err != nil {
		return c, usageError{fmt.Errorf("serve: %w", err)}
	}
	return c, nil
}

// serveReady is the line `serve --json` prints once it accepts requests.
type serveReady struct {
	Socket    string `json:"socket"`
	URL       string `json:"url"`
	TokenFile string `json:"token_file"`
	PID       int    `json:"pid"`
	Version   string `json:"version"`
}

func runServe(cmd *cobra.Command, g *globals, opts serveOptions) error {
	ctx := cmd.Context()
	// A server runs until it is signalled: SIGTERM or Ctrl-C is its normal stop (exit 0 after
	// the drain), not an interruption.
	g.stopsOnSignal = true
	// A server's log is read long after it was written: its lines carry the time.
	if h, ok := g.log.Handler().(*lineHandler); ok {
		g.log = slog.New(h.stamped())
	}
	if opts.Socket != "" && opts.Listen != "" {
		return usageError{errors.New("serve: give --socket or --listen, not both")}
	}
	if opts.LeaseTTL < time.Second {
		return usageError{fmt.Errorf("serve: --lease-ttl %s: want at least 1s", opts.LeaseTTL)}
	}
	if opts.MaxPerLease < 1 {
		return usageError{fmt.Errorf("serve: --max-per-lease %d: want at least 1", opts.MaxPerLease)}
	}
	// A bad --subnet-pool or ceiling is a usage error before anything listens.
	if _, err := g.subnets(); err != nil {
		return usageError{err}
	}
	tokenFile := ""
	if opts.Listen != "" {
		tokenFile = opts.TokenFile
		if tokenFile == "" {
			tokenFile = filepath.Join(g.stateDir(), "serve.token")
		}
	}
	ceiling, err := opts.ceiling(g, tokenFile)
	if err != nil {
		return err
	}
	ready := serveReady{PID: os.Getpid(), Version: currentVersion()}
	var (
		l     net.Listener
		token string
	)
	if opts.Listen != "" {
		if l, err = api.ListenTCP(opts.Listen); err != nil {
			return err
		}
		ready.TokenFile = tokenFile
		if token, err = api.WriteToken(ready.TokenFile); err != nil {
			_ = l.Close()
			return err
		}
		ready.URL = "http://" + l.Addr().String()
	} else {
		ready.Socket = opts.Socket
		if ready.Socket == "" {
			ready.Socket = api.DefaultSocketPath()
		}
		if l, err = api.ListenUnix(ready.Socket); err != nil {
			return err
		}
	}

	o, err := g.orchestrator(opts.Reaper)
	if err != nil {
		_ = l.Close()
		return err
	}
	defer o.Close()
	// Contact the engines now, so that what is wrong with them (one over plain tcp://, say)
	// is on stderr at start, not at the first task.
	go func() { _, _ = o.Backend().Ping(cmd.Context(), 0) }()
	srv := api.New(o, api.Options{
		LeaseTTL:    opts.LeaseTTL,
		MaxPerLease: opts.MaxPerLease,
		Token:       token,
		Version:     currentVersion(),
		Ceiling:     ceiling,
		Logger:      g.log,
	})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()

	if g.JSON {
		b, _ := json.Marshal(ready)
		fmt.Fprintln(g.stdout, string(b))
	} else if ready.Socket != "" {
		fmt.Fprintf(g.stdout, "composebox serve: listening on unix:%s\n", ready.Socket)
	} else {
		fmt.Fprintf(g.stdout, "composebox serve: listening on %s (token in %s)\n", ready.URL, ready.TokenFile)
	}

	if opts.StdinEOF {
		// The pipe closes when its parent dies, however it dies.
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		go func() {
			_, _ = io.Copy(io.Discard, cmd.InOrStdin())
			stop()
		}()
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	// Drain: no new connections, endless streams end, requests in flight finish (or are cut
	// after the drain timeout, which cancels their commands).
	srv.Stopping()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.DrainTimeout)
	if err := hs.Shutdown(dctx); err != nil {
		_ = hs.Close()
	}
	cancel()
	if err := srv.Close(context.WithoutCancel(ctx), opts.Keep); err != nil {
		return fmt.Errorf("serve: remove what the server owned: %w", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}
