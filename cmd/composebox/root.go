package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backends"
)

// globals are the flags every verb shares, and the process's streams.
type globals struct {
	JSON     bool
	LogLevel string
	// Managed subnets of the Docker backend (backends.Subnets).
	SubnetPool string
	SubnetBits int
	NoSubnets  bool
	// StateDir is --state-dir: where composebox keeps its state cache and samples' own
	// directories ("": $COMPOSEBOX_STATE_DIR, else the XDG data dir).
	StateDir string
	// Default limits of a container whose file sets none (orchestrator.Limits).
	ContainerMemory string
	ContainerPids   int64
	// backend is --backend and its settings.
	backend backendFlags

	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	// Progress is the --progress mode; progress renders it on stderr.
	Progress string
	progress *progress
	// out is the invocation's result, written once by finish.
	out outcome
	// helpCommand is the command line's verb ("composebox exec"), whose help a usage error
	// points at.
	helpCommand string
	// stopsOnSignal is set by a verb that runs until it is signalled (a server): a signal is
	// then its normal end, and it exits 0 when it stopped cleanly, not 128+signal.
	stopsOnSignal bool
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	defer g.backend.close()
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if cmd != nil {
		// A usage error points at the help of the verb it is about.
		g.helpCommand = cmd.CommandPath()
	}
	return g.finish(ctx, err)
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "composebox",
		Short:         "Docker Compose sandboxes for evaluation runs",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.setup()
		},
		// Without Args and RunE of its own, cobra reports an unknown verb as a plain error.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q", args[0])}
			}
			return cmd.Help()
		},
	}
	addVersionFlag(root)
	addBackendFlags(root, &g.backend)
	root.PersistentFlags().BoolVar(&g.JSON, "json", false, "machine-readable output on stdout")
	root.PersistentFlags().StringVar(&g.LogLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.Progress, "progress", progressAuto, "progress of up, run and cleanup on stderr: auto (live on a terminal, else plain lines), tty, plain or none")
	root.PersistentFlags().StringVar(&g.StateDir, "state-dir", "", "state cache directory (default $"+orchestrator.StateDirEnv+", else the XDG data dir)")
	root.PersistentFlags().StringVar(&g.SubnetPool, "subnet-pool", "10.213.0.0/16", "pool of managed subnets for sample networks")
	root.PersistentFlags().IntVar(&g.SubnetBits, "subnet-bits", 27, "prefix length of each managed subnet")
	root.PersistentFlags().BoolVar(&g.NoSubnets, "no-managed-subnets", false, "let the daemon number sample networks from its default address pools")
	root.PersistentFlags().StringVar(&g.ContainerMemory, "container-memory", "", "memory limit of every container whose compose file and policy set none, e.g. 2g; none for no limit (default: a quarter of the engine host's memory)")
	root.PersistentFlags().Int64Var(&g.ContainerPids, "container-pids", 0, "pids limit of every container whose compose file and policy set none; -1 for no limit (default 4096)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newVersionCmd(g),
		newDoctorCmd(g),
		newConfigCmd(g),
		newUpCmd(g),
		newDownCmd(g),
		newForkCmd(g),
		newSnapshotCmd(g),
		newResetCmd(g),
		newRunCmd(g),
		newExecCmd(g),
		newCpCmd(g),
		newLogsCmd(g),
		newPsCmd(g),
		newLsCmd(g),
		newCleanupCmd(g),
		newReapCmd(g),
		newServeCmd(g),
		newGendocsCmd(),
		newEgressGatewayCmd(),
		newEgressAllowCmd(),
		newEgressCmd(g),
	)
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// wrapArgs makes cobra's argument validation errors usage errors (exit 2).
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

func (g *globals) setup() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.LogLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", g.LogLevel)}
	}
	if _, err := g.subnets(); err != nil {
		return usageError{err}
	}
	switch g.Progress {
	case progressAuto, progressTTY, progressPlain, progressNone:
	default:
		return usageError{fmt.Errorf("--progress %q: want auto, tty, plain or none", g.Progress)}
	}
	g.progress = newProgress(g.stderr, g.Progress)
	g.log = slog.New(newLineHandler(g.stderr, level))
	// The compose library warns through the global logrus; only the CLI decides where it goes:
	// into the same slog logger as composebox's own lines, so stderr has one format.
	logrus.SetOutput(io.Discard)
	hooks := make(logrus.LevelHooks)
	hooks.Add(logrusToSlog{g})
	logrus.StandardLogger().ReplaceHooks(hooks)
	switch {
	case level <= slog.LevelDebug:
		logrus.SetLevel(logrus.DebugLevel)
	case level <= slog.LevelInfo:
		logrus.SetLevel(logrus.InfoLevel)
	case level <= slog.LevelWarn:
		logrus.SetLevel(logrus.WarnLevel)
	default:
		logrus.SetLevel(logrus.ErrorLevel)
	}
	return g.backend.setup(g)
}

// logrusToSlog forwards the compose library's logrus entries to composebox's logger (the one
// in force when they come: a verb may replace it).
type logrusToSlog struct{ g *globals }

func (logrusToSlog) Levels() []logrus.Level { return logrus.AllLevels }

func (h logrusToSlog) Fire(e *logrus.Entry) error {
	level := slog.LevelInfo
	switch {
	case e.Level <= logrus.ErrorLevel:
		level = slog.LevelError
	case e.Level == logrus.WarnLevel:
		level = slog.LevelWarn
	case e.Level >= logrus.DebugLevel:
		level = slog.LevelDebug
	}
	attrs := []any{"from", "compose"}
	for k, v := range e.Data {
		attrs = append(attrs, k, v)
	}
	h.g.log.Log(context.Background(), level, e.Message, attrs...)
	return nil
}

// stateDir is the state directory every verb uses: --state-dir, else the default.
func (g *globals) stateDir() string {
	if g.StateDir != "" {
		return g.StateDir
	}
	return orchestrator.DefaultStateDir()
}

// subnets is the managed-subnet configuration the flags ask for.
func (g *globals) subnets() (backends.Subnets, error) {
	s := backends.Subnets{Disabled: g.NoSubnets, Bits: g.SubnetBits}
	if g.NoSubnets {
		return s, nil
	}
	base, err := backends.ParseSubnetPool(g.SubnetPool, g.SubnetBits)
	if err != nil {
		return s, fmt.Errorf("--subnet-pool/--subnet-bits: %w", err)
	}
	s.Pool = base
	return s, nil
}
