package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/engine"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
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
	cleanup.Removed
}

func runDown(cmd *cobra.Command, g *globals, projects []string) error {
	ctx := cmd.Context()
	if handled, err := g.backend.down(ctx, g, projects); handled {
		return err
	}
	c, _, err := engine.Connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	results := []downResult{}
	var firstErr error
	listed, err := tracking.List(ctx, c)
	if err != nil {
		return err
	}
	names := make([]string, len(listed))
	for i, p := range listed {
		names[i] = p.Name
	}
	for _, p := range projects {
		if !slices.Contains(names, p) {
			if firstErr == nil {
				firstErr = cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("down %s: no composebox project by that name%s (see `composebox ls`)", p, tracking.DidYouMean(p, names)))
			}
			continue
		}
		removed, err := cleanup.RemoveProject(ctx, lifecycle.Retrying(c, lifecycle.RetryPolicy{}, g.log), p, cleanup.RemoveOptions{})
		if err == nil {
			// The directory a sample of a layout task bound (its log paths) goes with it.
			if rerr := os.RemoveAll(orchestrator.SampleDir(tracking.DefaultStateDir(), p)); rerr != nil {
				err = fmt.Errorf("remove the directory of %s: %w", p, rerr)
			}
		}
		results = append(results, downResult{Project: p, Removed: removed})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	g.setResult(downJSON{Projects: results}, func(w io.Writer) error {
		for _, r := range results {
			if _, err := fmt.Fprintf(w, "removed %s: %s\n", r.Project, counts(r.Containers, r.Networks, r.Volumes)); err != nil {
				return err
			}
		}
		return nil
	})
	return firstErr
}
