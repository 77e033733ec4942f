package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

type lsOptions struct {
	// All also lists projects whose owner is on another host (or unreadable).
	All bool
	// Task lists only the projects of this task.
	Task string
	// Quiet prints project names only, one a line.
	Quiet bool
}

func newLsCmd(g *globals) *cobra.Command {
	var opts lsOptions
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List composebox projects, live, stale and detached",
		Long: `Lists every composebox project found from its containers, networks and volumes (so a project
with only a leftover network is listed too), from the engine's labels alone.

STATUS is alive (the owner process runs), stale (the owner process is dead: 'cleanup --stale'
removes it), detached (handed over by 'up': never stale) or unknown (the owner is on another
host). Without --all, projects of other hosts are left out. A live sample waiting in a task's
warm pool ('up --warm', TaskSpec.Warm) shows as warm; once taken, SAMPLE is the id of the
sample init that took it.

HEALTH is ok when every container runs (or exited 0, a finished one-shot) and none is unhealthy
or still starting; else it names the services that are not, as db:exited(137),web:unhealthy.
'composebox ps -p PROJECT' shows each service.

PORTS lists the host ports the project's containers publish, as the engine bound them (an
ephemeral one where the compose file fixed a port). Over several engines (--engine, --engines),
ENGINE names the one that holds each project; an engine that does not answer leaves its
projects out, and ls fails naming it.

With --json, prints {"projects": [...]}, each project an object {name, task, sample, engine,
owner, status, stale, created, containers, networks, volumes, running, health, config,
container_names, ports, pool};
pool is warm, claimed (taken from a pool) or pooled (starting for a pool), and absent for a
sample started cold.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := g.orchestrator(false)
			if err != nil {
				return err
			}
			defer o.Close()
			return runLs(cmd.Context(), g, o, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "also list projects whose owner is on another host")
	cmd.Flags().StringVar(&opts.Task, "task", "", "only the projects of this task")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "print project names only")
	return cmd
}

// lsEntry is one line of `ls`: the project as its labels describe it.
type lsEntry = orchestrator.Project

func runLs(ctx context.Context, g *globals, o *orchestrator.Orchestrator, opts lsOptions) error {
	// Over several engines, one that does not answer leaves its projects out: the others' are
	// printed, and the command fails naming it.
	listing, err := o.List(ctx, orchestrator.ListOptions{Task: opts.Task, All: opts.All})
	if err != nil && listing.Projects == nil {
		return err
	}
	shown, hidden := listing.Projects, listing.Hidden
	g.setResult(lsResult{Projects: shown}, func(w io.Writer) error {
		if opts.Quiet {
			for _, p := range shown {
				if _, err := fmt.Fprintln(w, p.Name); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		// Over several engines, each project's engine is a column of its own.
		several := len(o.Engines()) > 1
		engine := func(p lsEntry) string { return "" }
		if several {
			fmt.Fprint(tw, "ENGINE\t")
			engine = func(p lsEntry) string { return dash(p.Engine) + "\t" }
		}
		fmt.Fprintln(tw, "PROJECT\tTASK\tSAMPLE\tSTATUS\tHEALTH\tCREATED\tCONTAINERS\tNETWORKS\tVOLUMES\tOWNER\tPORTS")
		now := time.Now()
		for _, p := range shown {
			ports := make([]string, len(p.Ports))
			for i, port := range p.Ports {
				ports[i] = port.String()
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", engine(p), p.Name, dash(p.Task), dash(p.Sample), lsStatus(p),
				dash(p.Health), age(now, p.Created), p.Containers, p.Networks, p.Volumes, dash(p.Owner), dash(strings.Join(ports, ",")))
		}
		return tw.Flush()
	})
	if hidden > 0 && !g.JSON && !opts.Quiet {
		fmt.Fprintf(g.stderr, "%d projects whose owner is on another host (or unknown) not shown: --all lists them\n", hidden)
	}
	return err
}

// lsResult is the JSON shape of `ls`.
type lsResult struct {
	Projects []lsEntry `json:"projects"`
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age is how long ago t was, as `docker ps` shows it.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// humanBytes formats n bytes in SI units, as the docker CLI does.
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	units := []string{"kB", "MB", "GB", "TB", "PB"}
	for f /= unit; f >= unit && i < len(units)-1; i++ {
		f /= unit
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.2f", f), "0"), ".0") + " " + units[i]
}

// lsStatus is the STATUS column: a live sample waiting in a warm pool shows as warm.
func lsStatus(p lsEntry) string {
	if p.Pool == labels.PoolWarm && p.Status == backend.StatusAlive {
		return labels.PoolWarm
	}
	return string(p.Status)
}
