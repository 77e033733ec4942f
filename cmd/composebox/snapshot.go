package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
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
	f := cmd.Flags()
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.StringVar(&opts.Task, "task", "", "task name (default: the sample's)")
	opts.flags.register(f)
	return cmd
}

// snapshotJSON is the JSON shape of `snapshot` and `reset`.
type snapshotJSON struct {
	Project  string `json:"project"`
	Snapshot string `json:"snapshot"`
}

func runSnapshot(cmd *cobra.Command, g *globals, name string, opts stateOptions) error {
	if opts.Project == "" {
		return usageError{fmt.Errorf("snapshot: give the sample with -p PROJECT")}
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
	if _, err := task.Snapshot(cmd.Context(), opts.Project, name); err != nil {
		return err
	}
	res := snapshotJSON{Project: opts.Project, Snapshot: name}
	g.setResult(res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "snapshot %s of %s\n", name, opts.Project)
		return err
	})
	return nil
}
