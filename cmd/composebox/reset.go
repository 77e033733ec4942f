package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newResetCmd(g *globals) *cobra.Command {
	var opts stateOptions
	cmd := &cobra.Command{
		Use:   "reset -p PROJECT NAME",
		Short: "Bring a live sample back to a snapshot",
		Long: `Brings the live sample PROJECT back to its snapshot NAME ('composebox snapshot'): the same project
and networks, its containers replaced by ones with the recorded files, its named volumes given the
recorded content again, its services started afresh and waited for. The task is loaded again as
'fork' does.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReset(cmd, g, args[0], opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.StringVar(&opts.Task, "task", "", "task name (default: the sample's)")
	opts.flags.register(f)
	return cmd
}

func runReset(cmd *cobra.Command, g *globals, name string, opts stateOptions) error {
	if opts.Project == "" {
		return usageError{fmt.Errorf("reset: give the sample with -p PROJECT")}
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
	if err := task.Reset(cmd.Context(), opts.Project, name); err != nil {
		return err
	}
	res := snapshotJSON{Project: opts.Project, Snapshot: name}
	g.setResult(res, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "reset %s to %s\n", opts.Project, name)
		return err
	})
	return nil
}
