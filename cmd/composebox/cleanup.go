package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

type cleanupOptions struct {
	// Names are projects, or containers whose projects to remove.
	Names     []string
	All       bool
	Task      string
	Stale     bool
	OlderThan time.Duration
	DryRun    bool
	Images    bool
}

func newCleanupCmd(g *globals) *cobra.Command {
	var opts cleanupOptions
	cmd := &cobra.Command{
		Use:   "cleanup [PROJECT|CONTAINER...] [--all] [--task T] [--stale] [--older-than DUR] [--dry-run] [--images]",
		Short: "Remove composebox projects (and unused task images)",
		Long: `Removes composebox projects: their containers (1 s stop grace), then networks, then volumes,
found by the engine's labels alone, several projects at once. What is already gone counts as
removed, so running it twice is harmless.

Which projects:
  PROJECT|CONTAINER...  these projects; a container's name or id selects its project
  --all                 every project, live and detached ones included
  --stale               projects whose owner process is dead (never a detached one, nor one
                        whose owner is on another host)
  --task T              only projects of task T (with --all or --stale)
  --older-than DUR      only projects created more than DUR ago (with --all or --stale)
Names cannot be combined with the other selectors. With no selector at all, cleanup prints this
help and removes nothing.

--images removes the images composebox built for tasks that have no live project (only task T's
with --task), never the base image, and reports the bytes reclaimed. An image a stale project's
container still uses is kept: add --stale to remove those projects first.

--dry-run prints what would be removed, and removes nothing.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Names = args
			if _, err := opts.selector(); err != nil {
				fmt.Fprint(g.stderr, cmd.UsageString())
				return usageError{err}
			}
			o, err := g.orchestrator(false)
			if err != nil {
				return err
			}
			defer o.Close()
			return runCleanup(cmd.Context(), g, o, opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.All, "all", false, "remove every project, live and detached ones included")
	f.StringVar(&opts.Task, "task", "", "only projects (and images) of this task")
	f.BoolVar(&opts.Stale, "stale", false, "remove projects whose owner process is dead")
	f.DurationVar(&opts.OlderThan, "older-than", 0, "only projects created more than this long ago")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print what would be removed, and remove nothing")
	f.BoolVar(&opts.Images, "images", false, "also remove images built for tasks that have no live project")
	return cmd
}

// selector is the project selection the flags ask for; the zero Selector when only --images
// (with or without --task) is given.
func (o cleanupOptions) selector() (backend.Selector, error) {
	sel := backend.Selector{Names: o.Names, All: o.All, Stale: o.Stale, Task: o.Task, OlderThan: o.OlderThan}
	if o.Images && len(o.Names) == 0 && !o.All && !o.Stale {
		if o.OlderThan != 0 {
			return sel, errors.New("cleanup: --older-than narrows --all or --stale, not --images")
		}
		return backend.Selector{}, nil
	}
	if sel.IsZero() {
		return sel, errors.New("cleanup: nothing selected: name projects or containers, or give --all, --stale or --images")
	}
	if err := sel.Validate(); err != nil {
		msg := err.Error()
		switch {
		case len(o.Names) > 0:
			msg = "cleanup: names cannot be combined with --all, --stale, --task or --older-than"
		case !o.All && !o.Stale:
			msg = "cleanup: --task and --older-than narrow --all or --stale: add one of them"
		}
		return sel, errors.New(msg)
	}
	return sel, nil
}

// cleanupResult is the JSON shape of `cleanup`.
type cleanupResult struct {
	DryRun   bool                   `json:"dry_run"`
	Projects []cleanupProjectResult `json:"projects"`
	Images   *backend.ImageReport   `json:"images,omitempty"`
}

type cleanupProjectResult struct {
	orchestrator.Project
	// Removed is nil in a dry run.
	Removed *backend.Removed `json:"removed,omitempty"`
	Error   string           `json:"error,omitempty"`
}

func runCleanup(ctx context.Context, g *globals, o *orchestrator.Orchestrator, opts cleanupOptions) error {
	popts := orchestrator.PruneOptions{Names: opts.Names, All: opts.All, Stale: opts.Stale, Task: opts.Task,
		OlderThan: opts.OlderThan, Images: opts.Images, DryRun: opts.DryRun,
		OnProject: func(p orchestrator.Project, status string) {
			switch status {
			case "removing":
				g.progress.set(p.Name, stRemoving, "")
			case "failed":
				g.progress.set(p.Name, stFailed, "")
			}
		}}
	rep, err := o.Prune(ctx, popts)
	if rep.Projects == nil && err != nil {
		return err
	}
	res := cleanupResult{DryRun: rep.DryRun, Projects: make([]cleanupProjectResult, 0, len(rep.Projects)), Images: rep.Images}
	for _, p := range rep.Projects {
		pr := cleanupProjectResult{Project: p.Project, Removed: p.Removed}
		if p.Err != nil {
			pr.Error = p.Err.Error()
		} else if p.Removed != nil {
			g.progress.set(p.Name, stRemoved, counts(p.Removed.Containers, p.Removed.Networks, p.Removed.Volumes))
		}
		res.Projects = append(res.Projects, pr)
	}
	g.setResult(res, func(w io.Writer) error { return printCleanup(w, res) })
	return err
}

func printCleanup(w io.Writer, res cleanupResult) error {
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	for _, p := range res.Projects {
		what := fmt.Sprintf("%s (task %s, %s)", p.Name, dash(p.Task), p.Status)
		if p.Engine != "" && p.Engine != backend.DefaultEngine {
			what = fmt.Sprintf("%s (task %s, %s, engine %s)", p.Name, dash(p.Task), p.Status, p.Engine)
		}
		switch {
		case p.Error != "":
			fmt.Fprintf(w, "failed %s: %s\n", what, strings.TrimSpace(p.Error))
		case p.Removed != nil:
			fmt.Fprintf(w, "%s %s: %s\n", verb, what, counts(p.Removed.Containers, p.Removed.Networks, p.Removed.Volumes))
		default:
			fmt.Fprintf(w, "%s %s: %s\n", verb, what, counts(p.Containers, p.Networks, p.Volumes))
		}
	}
	if res.Images == nil {
		if len(res.Projects) == 0 {
			_, err := fmt.Fprintln(w, "nothing to remove")
			return err
		}
		return nil
	}
	for _, im := range res.Images.Removed {
		fmt.Fprintf(w, "%s image %s (task %s, %s, %s of it its own)\n", verb, imageName(im), im.Task, humanBytes(im.Size), humanBytes(im.UniqueSize))
	}
	for _, im := range res.Images.Kept {
		fmt.Fprintf(w, "kept image %s (task %s): %s\n", imageName(im), im.Task, im.Reason)
	}
	if res.DryRun {
		_, err := fmt.Fprintf(w, "would reclaim about %s\n", humanBytes(res.Images.BytesReclaimed))
		return err
	}
	_, err := fmt.Fprintf(w, "reclaimed %s\n", humanBytes(res.Images.BytesReclaimed))
	return err
}

func counts(ctrs, nets, vols int) string {
	return fmt.Sprintf("%d %s, %d %s, %d %s", ctrs, plural(ctrs, "container"), nets, plural(nets, "network"), vols, plural(vols, "volume"))
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

func imageName(im backend.PrunedImage) string {
	if len(im.Tags) > 0 {
		return strings.Join(im.Tags, ",")
	}
	return strings.TrimPrefix(im.ID, "sha256:")[:12]
}
