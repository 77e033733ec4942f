package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
)

type runOptions struct {
	Task    string
	Timeout time.Duration
	Ready   time.Duration
	Reaper  bool
}

func newRunCmd(g *globals) *cobra.Command {
	var opts runOptions
	cmd := &cobra.Command{
		Use:   "run [PATH] [flags] -- CMD [ARG...]",
		Short: "Start a sample, run a command in its default service, and remove it",
		Long: `Up, exec and down in one go: starts one sample of PATH (as 'up' does), runs CMD in the default
service with its output streamed, removes the sample (also on Ctrl-C), and exits with CMD's code.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, argv := "", args
			if n := cmd.ArgsLenAtDash(); n == 1 {
				path, argv = args[0], args[1:]
			} else if n > 1 {
				return usageError{errUsage("run: at most one PATH before --")}
			}
			if len(argv) == 0 {
				return usageError{errUsage("run: no command after --")}
			}
			return runRun(cmd.Context(), g, path, argv, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Task, "task", "", "task name (default: the directory's name)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "kill the command after this long (exit 124)")
	cmd.Flags().DurationVar(&opts.Ready, "ready-timeout", 0, "readiness budget (default: derived from the healthchecks)")
	cmd.Flags().BoolVar(&opts.Reaper, "reaper", false, "start a watchdog that removes the sample if composebox dies without cleaning up")
	return cmd
}

func runRun(ctx context.Context, g *globals, path string, argv []string, opts runOptions) (err error) {
	o, err := g.orchestrator(opts.Reaper)
	if err != nil {
		return err
	}
	defer o.Close()
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: opts.Task, Path: path, ReadyTimeout: opts.Ready})
	if err != nil {
		return err
	}
	// Task.Cleanup removes the sample too, on a detached context: Ctrl-C still cleans up.
	defer func() {
		if cerr := task.Cleanup(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	sample, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		return err
	}
	return g.streamExec(ctx, sample.Default(), orchestrator.ExecRequest{Cmd: argv, Timeout: opts.Timeout})
}
