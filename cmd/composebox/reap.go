package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

type reapOptions struct {
	Owner    string
	Interval time.Duration
}

// newReapCmd is the watchdog as a verb. `up --reaper` and `run --reaper` (and library users of
// orchestrator.WithReaper) start the same loop by re-executing their own binary; this verb runs
// it in the foreground, for scripts and for harnesses that manage their own processes.
func newReapCmd(g *globals) *cobra.Command {
	var opts reapOptions
	cmd := &cobra.Command{
		Use:    "reap --owner HOST:PID:START",
		Short:  "Watch an owner process and remove its projects when it dies",
		Hidden: true,
		Long: `Waits until the process named by --owner (an owner label, host:pid:start-time) dies, then
removes every project whose owner label is exactly that owner, except detached ones, and exits.
It never touches the projects of a live owner or of another owner.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReap(cmd.Context(), g, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Owner, "owner", "", "owner label to watch (host:pid:start-time)")
	cmd.Flags().DurationVar(&opts.Interval, "interval", 250*time.Millisecond, "how often to check the owner")
	return cmd
}

func runReap(ctx context.Context, g *globals, opts reapOptions) error {
	if opts.Owner == "" {
		return usageError{fmt.Errorf("reap: --owner is required")}
	}
	if _, err := labels.ParseOwner(opts.Owner); err != nil {
		return usageError{err}
	}
	ropts := orchestrator.ReapOptions{Interval: opts.Interval, StateDir: g.stateDir()}
	for _, e := range g.backend.engines {
		ep, err := e.EndpointOf()
		if err != nil {
			return usageError{err}
		}
		ropts.Engines = append(ropts.Engines, ep)
	}
	var results []backend.SweepResult
	var err error
	if g.backend.chosen != nil {
		// Not Docker (--backend kubernetes): through the backend's own listing and Down.
		results, err = orchestrator.ReapBackend(ctx, g.backend.chosen, opts.Owner, ropts)
	} else {
		results, err = orchestrator.Reap(ctx, opts.Owner, ropts)
	}
	out := make([]cleanupProjectResult, 0, len(results))
	for _, r := range results {
		rm := r.Removed
		pr := cleanupProjectResult{Project: r.Project, Removed: &rm}
		if r.Err != nil {
			pr.Error = r.Err.Error()
		}
		out = append(out, pr)
	}
	g.setResult(reapJSON{Projects: out}, func(w io.Writer) error {
		for _, p := range out {
			var err error
			if p.Error == "" {
				_, err = fmt.Fprintf(w, "reaped %s (task %s): %s\n", p.Name, dash(p.Task), counts(p.Removed.Containers, p.Removed.Networks, p.Removed.Volumes))
			} else {
				_, err = fmt.Fprintf(w, "failed %s (task %s): %s\n", p.Name, dash(p.Task), p.Error)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// reapJSON is the JSON shape of `reap`.
type reapJSON struct {
	Projects []cleanupProjectResult `json:"projects"`
}
