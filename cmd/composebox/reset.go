package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
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
	opts.register(cmd.Flags())
	return cmd
}

func runReset(cmd *cobra.Command, g *globals, name string, opts stateOptions) error {
	return onSampleTask(cmd, g, "reset", name, opts, func(ctx context.Context, task *orchestrator.Task) (string, error) {
		return fmt.Sprintf("reset %s to %s", opts.Project, name), task.Reset(ctx, opts.Project, name)
	})
}
