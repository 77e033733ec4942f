package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/composebox/composebox/orchestrator"
)

type stateOptions struct {
	Project string
	Task    string
	flags   taskFlags
}

func newSnapshotCmd(g *globals) *cobra.Command {
	var opts stateOptions
	cmd := &cobra.Command{
		Use:   "snapshot -p PROJECT NAME",
		Short: "Record a live sample's files and volumes under a name, for reset",
		Long: `Records every service's files and every named volume's content of the live sample PROJECT under
NAME (1 to 40 of a-z, 0-9, '_', '.', '-'); a snapshot of the same name is replaced. The sample is
paused for the cut and runs on untouched. 'composebox reset -p PROJECT NAME' takes it back there.
The snapshot goes with the sample ('down', 'cleanup'). The task is loaded again as 'fork' does
(--file and the task flags when its files cannot be found from its labels).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSnapshot(cmd, g, args[0], opts)
		},
	}
	opts.register(cmd.Flags())
	return cmd
}

// snapshotJSON is the JSON shape of `snapshot` and `reset`.
type snapshotJSON struct {
	Project  string `json:"project"`
	Snapshot string `json:"snapshot"`
}

func runSnapshot(cmd *cobra.Command, g *globals, name string, opts stateOptions) error {
	return onSampleTask(cmd, g, "snapshot", name, opts, func(ctx context.Context, task *orchestrator.Task) (string, error) {
		_, err := task.Snapshot(ctx, opts.Project, name)
		return fmt.Sprintf("snapshot %s of %s", name, opts.Project), err
	})
}

// register adds the flags snapshot and reset share.
func (opts *stateOptions) register(f *pflag.FlagSet) {
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.StringVar(&opts.Task, "task", "", "task name (default: the sample's)")
	opts.flags.register(f)
}

// onSampleTask loads the task of the live sample opts.Project again (as fork does), runs do
// on it, and sets the result: snapshotJSON for --json, else do's line.
func onSampleTask(cmd *cobra.Command, g *globals, verb, name string, opts stateOptions, do func(context.Context, *orchestrator.Task) (string, error)) error {
	if opts.Project == "" {
		return usageError{fmt.Errorf("%s: give the sample with -p PROJECT", verb)}
	}
	o, err := g.orchestrator(false)
	if err != nil {
		return err
	}
	defer o.Close()
	task, err := taskOf(cmd, g, o, opts.Project, opts.Task, "", &opts.flags)
	if err != nil {
		return err
	}
	defer func() { _ = task.Cleanup(context.WithoutCancel(cmd.Context())) }()
	line, err := do(cmd.Context(), task)
	if err != nil {
		return err
	}
	g.setResult(snapshotJSON{Project: opts.Project, Snapshot: name}, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, line)
		return err
	})
	return nil
}
