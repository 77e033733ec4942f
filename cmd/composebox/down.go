package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

func newDownCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "down PROJECT...",
		Short: "Remove samples' containers, networks and volumes",
		Long: `Removes each PROJECT's containers (1 s stop grace), networks and volumes, found by their
labels alone, so it works from any process. A project that does not exist is a not_found error
naming the projects whose names are near (the others are still removed).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDown(cmd, g, args)
		},
	}
	cmd.Flags().BoolP("volumes", "v", true, "down always removes the sample's volumes (accepted as docker compose down takes it)")
	return cmd
}

// downJSON is the JSON shape of `down`.
type downJSON struct {
	Projects []downResult `json:"projects"`
}

type downResult struct {
	Project string `json:"project"`
	backend.Removed
}

func runDown(cmd *cobra.Command, g *globals, projects []string) error {
	o, err := g.orchestrator(false)
	if err != nil {
		return err
	}
	defer o.Close()
	removed, err := o.Remove(cmd.Context(), projects, orchestrator.RemoveOptions{})
	results := make([]downResult, len(removed))
	for i, r := range removed {
		results[i] = downResult{Project: r.Project, Removed: r.Removed}
	}
	if removed == nil && err != nil {
		return err
	}
	g.setResult(downJSON{Projects: results}, func(w io.Writer) error {
		for _, r := range results {
			if _, err := fmt.Fprintf(w, "removed %s: %s\n", r.Project, counts(r.Containers, r.Networks, r.Volumes)); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
