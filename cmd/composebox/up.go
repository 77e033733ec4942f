package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
)

type upOptions struct {
	Task    string
	Timeout time.Duration
	Reaper  bool
	flags   taskFlags
}

func newUpCmd(g *globals) *cobra.Command {
	var opts upOptions
	cmd := &cobra.Command{
		Use:   "up [PATH]",
		Short: "Start one sample of a task and leave it running",
		Long: `Resolves PATH (a compose file, a directory, a Harbor or Terminal-Bench task, a Dockerfile, or
nothing for the default image), builds what it needs, starts one sample and waits until every
service is ready. The sample is left running; remove it with 'composebox down PROJECT'. Prints the
project name (with --json, its services and their published ports).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			return runUp(cmd, g, path, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Task, "task", "", "task name (default: the layout's, else the directory's)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "readiness budget (default: derived from the healthchecks)")
	cmd.Flags().BoolVar(&opts.Reaper, "reaper", false, "start a watchdog that removes the sample if composebox dies before it is ready")
	opts.flags.register(cmd.Flags())
	return cmd
}

// upResult is the JSON shape of `up` with --json: a fixed surface that scripts parse.
type upResult struct {
	Project  string          `json:"project"`
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
	task, err := o.TaskInit(ctx, spec)
	if err != nil {
		return err
	}
	g.progress.starting(task)
	sample, err := task.SampleInit(ctx, sspec)
	if err != nil {
		return err
	}
	// Hand the sample over: it outlives this process and is never stale. Interrupted before
	// the hand-over is complete, up removes it: no sample is left behind by a failed up.
	if err := sample.Detach(ctx); err != nil || ctx.Err() != nil {
		_ = sample.Cleanup(context.WithoutCancel(ctx))
		return cmp.Or(err, ctx.Err())
	}
	res := upResult{Project: sample.Project()}
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
	return nil
}

// orchestrator is the library as the CLI verbs use it.
func (g *globals) orchestrator(reaper bool, extra ...orchestrator.Option) (*orchestrator.Orchestrator, error) {
	sn, err := g.subnets()
	if err != nil {
		return nil, usageError{err}
	}
	opts := []orchestrator.Option{orchestrator.WithLogger(g.log), orchestrator.WithObserver(g.progress.observer()), orchestrator.WithSubnets(sn)}
	if reaper {
		opts = append(opts, orchestrator.WithReaper())
	}
	return orchestrator.New(append(opts, extra...)...)
}
