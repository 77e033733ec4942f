package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/engine"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
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
	StateDir  string
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
			sel, err := opts.selector()
			if err != nil {
				fmt.Fprint(g.stderr, cmd.UsageString())
				return usageError{err}
			}
			ctx := cmd.Context()
			c, _, err := engine.Connect(ctx, 0)
			if err != nil {
				return err
			}
			defer c.Close()
			// Teardown rides out daemon hiccups as the library's does.
			return runCleanup(ctx, g, lifecycle.Retrying(c, lifecycle.RetryPolicy{}, g.log), sel, opts)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.All, "all", false, "remove every project, live and detached ones included")
	f.StringVar(&opts.Task, "task", "", "only projects (and images) of this task")
	f.BoolVar(&opts.Stale, "stale", false, "remove projects whose owner process is dead")
	f.DurationVar(&opts.OlderThan, "older-than", 0, "only projects created more than this long ago")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print what would be removed, and remove nothing")
	f.BoolVar(&opts.Images, "images", false, "also remove images built for tasks that have no live project")
	f.StringVar(&opts.StateDir, "state-dir", "", "state cache directory (default $"+tracking.StateDirEnv+", else the XDG data dir)")
	_ = f.MarkHidden("state-dir")
	return cmd
}

// selector is the project selection the flags ask for; the zero Selector when only --images
// (with or without --task) is given.
func (o cleanupOptions) selector() (tracking.Selector, error) {
	sel := tracking.Selector{Names: o.Names, All: o.All, Stale: o.Stale, Task: o.Task, OlderThan: o.OlderThan}
	if o.Images && len(o.Names) == 0 && !o.All && !o.Stale {
		if o.OlderThan != 0 {
			return sel, errors.New("cleanup: --older-than narrows --all or --stale, not --images")
		}
		return tracking.Selector{}, nil
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
	Images   *cleanup.ImageReport   `json:"images,omitempty"`
}

type cleanupProjectResult struct {
	tracking.Project
	// Removed is nil in a dry run.
	Removed *cleanup.Removed `json:"removed,omitempty"`
	Error   string           `json:"error,omitempty"`
}

func runCleanup(ctx context.Context, g *globals, c client.APIClient, sel tracking.Selector, opts cleanupOptions) error {
	res := cleanupResult{DryRun: opts.DryRun, Projects: []cleanupProjectResult{}}
	cache := tracking.OpenCache(stateDir(opts.StateDir))
	var errs []error
	if opts.Task != "" {
		if err := knownTask(ctx, c, opts.Task); err != nil {
			return err
		}
	}
	if !sel.IsZero() {
		planned, err := tracking.Plan(ctx, c, sel)
		if err != nil {
			return err
		}
		if opts.DryRun {
			for _, p := range planned {
				res.Projects = append(res.Projects, cleanupProjectResult{Project: p})
			}
		} else {
			for _, p := range planned {
				g.progress.set(p.Name, stRemoving, "")
			}
			results, err := tracking.RemovePlanned(ctx, c, planned, cleanup.RemoveOptions{})
			if err != nil {
				errs = append(errs, err)
			}
			for _, r := range results {
				pr := cleanupProjectResult{Project: r.Project, Removed: &r.Removed}
				if r.Err != nil {
					pr.Error = r.Err.Error()
				} else {
					_ = cache.DeleteSample(r.Name)
					// A layout task's sample bound a directory of its own: it goes too.
					if err := os.RemoveAll(orchestrator.SampleDir(stateDir(opts.StateDir), r.Name)); err != nil {
						pr.Error = err.Error()
					}
				}
				res.Projects = append(res.Projects, pr)
				if pr.Error != "" {
					g.progress.set(r.Name, stFailed, "")
				} else {
					g.progress.set(r.Name, stRemoved, counts(r.Removed.Containers, r.Removed.Networks, r.Removed.Volumes))
				}
			}
			pruneCache(ctx, c, cache)
		}
	}
	if opts.Images && ctx.Err() == nil {
		rep, err := pruneImages(ctx, c, cache, opts)
		res.Images = &rep
		if err != nil {
			errs = append(errs, err)
		}
	}
	g.setResult(res, func(w io.Writer) error { return printCleanup(w, res) })
	return errors.Join(errs...)
}

// pruneImages removes the images of the tasks that have no live project and that no live
// process holds.
func pruneImages(ctx context.Context, c client.APIClient, cache *tracking.Cache, opts cleanupOptions) (cleanup.ImageReport, error) {
	live, err := tracking.LiveTasks(ctx, c, cache)
	if err != nil {
		return cleanup.ImageReport{Removed: []cleanup.Image{}}, fmt.Errorf("prune images: %w", err)
	}
	return cleanup.PruneImages(ctx, c, cleanup.ImageOptions{Task: opts.Task, Keep: live, DryRun: opts.DryRun})
}

// pruneCache forgets cached samples whose projects are gone and holds of dead processes. The
// cache is only a cache: failures are ignored.
func pruneCache(ctx context.Context, c client.APIClient, cache *tracking.Cache) {
	left, err := tracking.List(ctx, c)
	if err != nil {
		return
	}
	exists := map[string]bool{}
	for _, p := range left {
		exists[p.Name] = true
	}
	_ = cache.Prune(func(p string) bool { return exists[p] })
}

// knownTask fails with not_found, suggesting near names, when no project and no image carries
// task's label: a misspelt --task would otherwise remove nothing without a word.
func knownTask(ctx context.Context, c client.APIClient, task string) error {
	projects, err := tracking.List(ctx, c)
	if err != nil {
		return err
	}
	var tasks []string
	for _, p := range projects {
		tasks = append(tasks, p.Task)
	}
	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.ManagedFilter))})
	if err != nil {
		return fmt.Errorf("cleanup: list images: %w", err)
	}
	for _, im := range imgs {
		tasks = append(tasks, im.Labels[labels.LabelTask])
	}
	if slices.Contains(tasks, task) {
		return nil
	}
	return cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("cleanup --task %s: no project or image of that task%s (see `composebox ls`)", task, tracking.DidYouMean(task, tasks)))
}

func printCleanup(w io.Writer, res cleanupResult) error {
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	for _, p := range res.Projects {
		what := fmt.Sprintf("%s (task %s, %s)", p.Name, dash(p.Task), p.Status)
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

func imageName(im cleanup.Image) string {
	if len(im.Tags) > 0 {
		return strings.Join(im.Tags, ",")
	}
	return strings.TrimPrefix(im.ID, "sha256:")[:12]
}
