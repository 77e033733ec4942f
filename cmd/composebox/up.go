package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/spf13/cobra"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

type upOptions struct {
	Task    string
	Timeout time.Duration
	Reaper  bool
	Warm    int
	Cold    bool
	// FromSnapshot is PROJECT:NAME, a snapshot of a live sample of the task.
	FromSnapshot string
	flags        taskFlags
}

func newUpCmd(g *globals) *cobra.Command {
	var opts upOptions
	cmd := &cobra.Command{
		Use:   "up [PATH]",
		Short: "Start one sample of a task and leave it running",
		Long: `Resolves PATH (a compose file, a directory, a Harbor or Terminal-Bench task, a Dockerfile, or
nothing for the default image), builds what it needs, starts one sample and waits until every
service is ready. The sample is left running; remove it with 'composebox down PROJECT'. Prints the
project name (with --json, its services and their published ports).

When another 'composebox up --warm N' keeps a warm pool of the same task (same name and
configuration) on this host, up takes a ready sample from it instead of starting one, in tens of
milliseconds; --cold always starts a new one.

With --warm N, up stays in the foreground after printing its project and keeps N ready samples
of the task for other 'up' runs (and library callers that set TakeShared) to take, refilling as
they are taken, until it is interrupted (Ctrl-C, SIGTERM): it then removes the samples still in
the pool and exits. The sample it printed, and every sample taken from the pool, is handed over
and stays. 'ls' shows the pooled samples as warm; if up is killed, they are stale and
'cleanup --stale' (or --reaper's watchdog) removes them. A task whose files use per-sample
variables (--metadata, SAMPLE_METADATA_*) cannot be pooled: up says why and keeps no pool.

With --from-snapshot PROJECT:NAME, the sample starts from snapshot NAME of PROJECT, a live sample
of the same task ('composebox snapshot -p PROJECT NAME'): its files and volumes, with its
services started afresh. With --warm too, the pool fills from it: up first copies the snapshot
for the pool (so that the pool outlives PROJECT), and other 'up --from-snapshot PROJECT:NAME'
runs take from that pool; the copy goes with the pool.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			g.warnDeprecated(cmd, opts.flags.deprecations(false)...)
			return runUp(cmd, g, path, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Task, "task", "", "task name (default: the layout's, else the directory's)")
	secondsVar(cmd.Flags(), &opts.Timeout, "wait-timeout", 0, "readiness budget, e.g. 2m or 120 (default: derived from the healthchecks)")
	// --timeout is a command's kill on run and exec; here it was the readiness budget.
	secondsVar(cmd.Flags(), &opts.Timeout, "timeout", 0, "")
	deprecate(cmd.Flags(), "timeout", "--wait-timeout")
	cmd.Flags().BoolP("detach", "d", true, "up always detaches: the sample is left running (accepted as docker compose up takes it)")
	cmd.Flags().BoolVar(&opts.Reaper, "reaper", false, "start a watchdog that removes the sample if composebox dies before it is ready")
	cmd.Flags().IntVar(&opts.Warm, "warm", 0, "after starting the sample, keep N ready samples of the task for other 'up' runs until interrupted")
	cmd.Flags().BoolVar(&opts.Cold, "cold", false, "always start a new sample: never take one from a warm pool")
	cmd.Flags().StringVar(&opts.FromSnapshot, "from-snapshot", "", "PROJECT:NAME: start the sample (and, with --warm, the pool's) from snapshot NAME of live sample PROJECT")
	opts.flags.register(cmd.Flags())
	return cmd
}

// upResult is the JSON shape of `up` with --json: a fixed surface that scripts parse.
type upResult struct {
	Project string `json:"project"`
	// Engine names the engine the sample lives on ("default" for the one engine).
	Engine   string          `json:"engine,omitempty"`
	Services []upServiceJSON `json:"services"`
}

type upServiceJSON struct {
	Name       string `json:"name"`
	Container  string `json:"container"`
	Default    bool   `json:"default"`
	WorkingDir string `json:"working_dir"`
	// Ports are the service's published ports as the engine bound them: an ephemeral host port
	// where the file fixed one.
	Ports []orchestrator.Port `json:"ports,omitempty"`
}

func runUp(cmd *cobra.Command, g *globals, path string, opts upOptions) error {
	ctx := cmd.Context()
	o, err := g.orchestrator(opts.Reaper)
	if err != nil {
		return err
	}
	defer o.Close()
	spec, sspec, err := opts.flags.specs(opts.Task, path)
	if err != nil {
		return err
	}
	spec.ReadyTimeout = opts.Timeout
	g.progress.building()
	if opts.Warm < 0 {
		return usageError{fmt.Errorf("up: --warm %d: must not be negative", opts.Warm)}
	}
	var fromProject, fromName string
	if opts.FromSnapshot != "" {
		var ok bool
		if fromProject, fromName, ok = strings.Cut(opts.FromSnapshot, ":"); !ok || fromProject == "" || fromName == "" {
			return usageError{fmt.Errorf("up: --from-snapshot %q: want PROJECT:NAME", opts.FromSnapshot)}
		}
	}
	spec.Warm, spec.SharePool, spec.TakeShared = opts.Warm, opts.Warm > 0, !opts.Cold
	if fromProject != "" {
		spec.Warm = 0 // the pool starts below, from the snapshot
	}
	task, err := o.TaskInit(ctx, spec)
	if err != nil {
		return err
	}
	if opts.Warm > 0 || fromProject != "" {
		// Ends the pool on return: its samples (and its copy of a snapshot) go, the
		// handed-over ones stay.
		defer func() { _ = task.Cleanup(context.WithoutCancel(ctx)) }()
	}
	if opts.Warm > 0 {
		if st := task.PoolStatus(); !st.Poolable {
			return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("up --warm: task %s cannot be pooled: %s (drop --warm)", task.Name(), st.Reason))
		}
	}
	var snap *orchestrator.Snapshot
	if fromProject != "" {
		if snap, err = task.FindSnapshot(ctx, fromProject, fromName); err != nil {
			return err
		}
		if opts.Warm > 0 {
			if err := task.Prewarm(ctx, opts.Warm, orchestrator.PrewarmOptions{From: snap}); err != nil {
				return err
			}
		}
	}
	g.progress.starting(task)
	var sample *orchestrator.Sample
	if snap != nil {
		sample, err = task.SampleFrom(ctx, snap, sspec)
	} else {
		sample, err = task.SampleInit(ctx, sspec)
	}
	if err != nil {
		return err
	}
	// Hand the sample over: it outlives this process and is never stale. Interrupted before
	// the hand-over is complete, up removes it: no sample is left behind by a failed up.
	if err := sample.Detach(ctx); err != nil || ctx.Err() != nil {
		_ = sample.Cleanup(context.WithoutCancel(ctx))
		return cmp.Or(err, ctx.Err())
	}
	res := upResult{Project: sample.Project(), Engine: sample.Engine()}
	for _, sb := range sample.Sandboxes() {
		svc := upServiceJSON{Name: sb.Service(), Container: sb.ContainerName(), Default: sb.IsDefault(), WorkingDir: sb.WorkingDir()}
		if conn, err := sb.Connection(ctx); err == nil {
			svc.Ports = conn.Ports
		}
		res.Services = append(res.Services, svc)
	}
	g.setResult(res, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, res.Project)
		return err
	})
	if opts.Warm == 0 {
		return nil
	}
	// The pool stays until an interrupt: print the result now, for whoever waits on it, and
	// end on the signal with exit 0.
	if err := g.writeResultNow(); err != nil {
		return err
	}
	g.stopsOnSignal = true
	return keepPool(ctx, g, task, opts.Warm)
}

// keepPool keeps the task's warm pool until ctx ends (an interrupt), saying so on stderr.
func keepPool(ctx context.Context, g *globals, task *orchestrator.Task, n int) error {
	fmt.Fprintf(g.stderr, "keeping %d warm samples of task %s for other 'composebox up' runs; interrupt to end the pool\n", n, task.Name())
	<-ctx.Done()
	return nil
}

// orchestrator is the library as the CLI verbs use it.
func (g *globals) orchestrator(reaper bool, extra ...orchestrator.Option) (*orchestrator.Orchestrator, error) {
	lim, err := g.containerLimits()
	if err != nil {
		return nil, usageError{err}
	}
	opts := []orchestrator.Option{orchestrator.WithLogger(g.log), orchestrator.WithObserver(g.progress.observer()), orchestrator.WithLimits(lim),
		orchestrator.WithStateDir(g.stateDir())}
	if reaper {
		opts = append(opts, orchestrator.WithReaper())
	}
	opts, err = g.backend.options(g, append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return orchestrator.New(opts...)
}

// bareOrchestrator is the library with the flags' backend, logger and state directory alone:
// what the verbs that reach live samples (exec, logs, ps, egress) need.
func (g *globals) bareOrchestrator() (*orchestrator.Orchestrator, error) {
	opts, err := g.backend.options(g, orchestrator.WithLogger(g.log), orchestrator.WithStateDir(g.stateDir()))
	if err != nil {
		return nil, err
	}
	return orchestrator.New(opts...)
}

// containerLimits are --container-memory and --container-pids as orchestrator.Limits.
func (g *globals) containerLimits() (orchestrator.Limits, error) {
	l := orchestrator.Limits{ContainerPids: g.ContainerPids}
	switch m := strings.TrimSpace(g.ContainerMemory); m {
	case "":
	case "none":
		l.ContainerMemory = -1
	default:
		var b types.UnitBytes
		if err := b.DecodeMapstructure(m); err != nil || b <= 0 {
			return l, fmt.Errorf("--container-memory %q: want a size such as 512m or 2g, or none", g.ContainerMemory)
		}
		l.ContainerMemory = int64(b)
	}
	if g.ContainerPids < -1 {
		return l, fmt.Errorf("--container-pids %d: want a positive number, or -1 for no limit", g.ContainerPids)
	}
	return l, nil
}
