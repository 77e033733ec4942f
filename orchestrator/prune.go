package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// PruneOptions selects what Prune removes: projects by Names (or the names or ids of their
// containers), or All or Stale ones narrowed by Task and OlderThan; and with Images, the
// images built for tasks that have no live project. The zero value removes nothing.
type PruneOptions struct {
	Names     []string
	All       bool
	Stale     bool
	Task      string
	OlderThan time.Duration
	// Images removes the images composebox built for tasks that have no live project and no
	// live process holding them (only Task's with Task), never the base image.
	Images bool
	// DryRun reports what would be removed, and removes nothing.
	DryRun bool
	// OnProject, when set, is told of each selected project as its removal starts
	// ("removing") and ends ("removed" or "failed").
	OnProject func(p Project, status string)
}

// selector is the project selection of o; the zero Selector selects none.
func (o PruneOptions) selector() backend.Selector {
	return backend.Selector{Names: o.Names, All: o.All, Stale: o.Stale, Task: o.Task, OlderThan: o.OlderThan}
}

// PrunedProject is one project Prune removed (or would remove, or failed to).
type PrunedProject struct {
	Project
	// Removed is nil in a dry run.
	Removed *backend.Removed
	Err     error
}

// PruneReport is what Prune did. Projects is nil when Prune failed before it removed anything.
type PruneReport struct {
	DryRun   bool
	Projects []PrunedProject
	// Images is nil unless PruneOptions.Images.
	Images *backend.ImageReport
}

// Prune removes the projects opts selects, of any process, as Remove does, then forgets the
// state cache's records of projects that are gone, and with Images removes unused task
// images. A Task that no project and no image carries is ErrNotFound (a misspelt task would
// otherwise remove nothing without a word). Failures are joined into one error; what is
// already gone counts as removed, so pruning twice is harmless.
func (o *Orchestrator) Prune(ctx context.Context, opts PruneOptions) (PruneReport, error) {
	rep := PruneReport{DryRun: opts.DryRun}
	sel := opts.selector()
	selects := len(sel.Names) > 0 || sel.All || sel.Stale
	if selects {
		// Checked here rather than left to the backend's Sweep, so that a selection mixing
		// names with filters is refused alike whatever the backend.
		if err := sel.Validate(); err != nil {
			return rep, fmt.Errorf("prune: %w", err)
		}
	}
	if _, err := o.prerequisites(ctx); err != nil {
		return rep, err
	}
	if opts.Task != "" {
		if err := o.knownTask(ctx, opts.Task); err != nil {
			return rep, err
		}
	}
	var errs []error
	if selects {
		pruned, err := o.pruneProjects(ctx, sel, opts)
		if pruned == nil {
			// Nothing could be selected: nothing was removed.
			return rep, err
		}
		rep.Projects = pruned
		if err != nil {
			errs = append(errs, err)
		}
	}
	if rep.Projects == nil {
		rep.Projects = []PrunedProject{}
	}
	if opts.Images && ctx.Err() == nil {
		ir, err := o.pruneImages(ctx, opts)
		rep.Images = &ir
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

func (o *Orchestrator) pruneProjects(ctx context.Context, sel backend.Selector, opts PruneOptions) ([]PrunedProject, error) {
	// Over several engines, one that does not answer leaves its projects out of the plan: the
	// others' are removed all the same, and the error names it.
	planned, planErr := backend.Plan(ctx, o.backend, sel)
	if planErr != nil && len(planned) == 0 {
		return nil, o.engineLost(planErr)
	}
	planErr = o.engineLost(planErr)
	out := []PrunedProject{}
	if opts.DryRun {
		for _, p := range planned {
			out = append(out, PrunedProject{Project: p})
		}
		return out, planErr
	}
	if len(planned) == 0 {
		return out, planErr
	}
	names := make([]string, len(planned))
	for i, p := range planned {
		names[i] = p.Name
		if opts.OnProject != nil {
			opts.OnProject(p, "removing")
		}
	}
	// The projects planned are removed by name: a project selected as stale is removed even
	// if its listing changes in between, as one removal of a plan should.
	res, err := o.sweep(ctx, backend.Selector{Names: names}, backend.RemoveOptions{})
	byName := map[string]backend.SweepResult{}
	for _, r := range res {
		byName[r.Name] = r
	}
	for _, p := range planned {
		r, ok := byName[p.Name]
		if !ok {
			r = backend.SweepResult{Project: p} // gone in between: nothing left to remove
		}
		pp := PrunedProject{Project: p, Removed: &r.Removed, Err: r.Err}
		out = append(out, pp)
		if opts.OnProject != nil {
			status := "removed"
			if pp.Err != nil {
				status = "failed"
			}
			opts.OnProject(pp.Project, status)
		}
	}
	o.pruneCache(ctx)
	return out, errors.Join(planErr, o.engineLost(err))
}

// pruneCache forgets cached samples whose projects are gone and holds of dead processes. The
// cache is only a cache: failures are ignored.
func (o *Orchestrator) pruneCache(ctx context.Context) {
	left, err := o.backend.ListProjects(ctx)
	if err != nil {
		return
	}
	exists := map[string]bool{}
	for _, p := range left {
		exists[p.Name] = true
	}
	_ = o.cache().Prune(func(p string) bool { return exists[p] })
}

// pruneImages removes the images of the tasks that have no live project and that no live
// process holds.
func (o *Orchestrator) pruneImages(ctx context.Context, opts PruneOptions) (backend.ImageReport, error) {
	live, err := o.liveTasks(ctx)
	if err != nil {
		return backend.ImageReport{Removed: []backend.PrunedImage{}}, fmt.Errorf("prune images: %w", err)
	}
	p, ok := backend.AsPruner(o.backend)
	if !ok {
		return backend.ImageReport{Removed: []backend.PrunedImage{}}, backend.Lacks("prune images", o.backend, "backend.Pruner")
	}
	rep, err := p.PruneImages(ctx, backend.PruneImagesOptions{Task: opts.Task, Keep: live, DryRun: opts.DryRun})
	return rep, o.engineLost(err)
}

// liveTasks maps each live task to why it is live: a task is live while it has a project that
// is not stale (alive, detached, or owned on another host), or while a live process holds it
// in the state cache (TaskInit done, Cleanup not yet), even with no sample running.
func (o *Orchestrator) liveTasks(ctx context.Context) (map[string]string, error) {
	live := map[string]string{}
	projects, err := o.backend.ListProjects(ctx)
	if err != nil {
		return nil, fmt.Errorf("find live tasks: %w", o.engineLost(err))
	}
	for _, p := range projects {
		if !p.Stale && live[p.Task] == "" {
			live[p.Task] = fmt.Sprintf("task has a %s project, %s", p.Status, p.Name)
		}
	}
	holds, err := o.cache().Tasks()
	if err != nil {
		return nil, fmt.Errorf("find live tasks: %w", err)
	}
	for _, h := range holds {
		if tracking.OwnerStatus(h.Owner) != backend.StatusStale && live[h.Task] == "" {
			live[h.Task] = "task is held by process " + h.Owner
		}
	}
	return live, nil
}

// knownTask fails with ErrNotFound, suggesting near names, when no project and no image
// carries task's label.
func (o *Orchestrator) knownTask(ctx context.Context, task string) error {
	projects, err := o.backend.ListProjects(ctx)
	if err != nil {
		return o.engineLost(err)
	}
	var tasks []string
	for _, p := range projects {
		tasks = append(tasks, p.Task)
	}
	var imgs []backend.ImageInfo
	if p, ok := backend.AsPruner(o.backend); ok {
		// A backend that prunes no image leaves no task's image behind to know it by.
		imgs, err = p.ListImages(ctx, []string{labels.ManagedFilter})
		if err != nil {
			return fmt.Errorf("cleanup: %w", o.engineLost(err))
		}
	}
	for _, im := range imgs {
		tasks = append(tasks, im.Labels[labels.LabelTask])
	}
	if slices.Contains(tasks, task) {
		return nil
	}
	return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("cleanup --task %s: no project or image of that task%s (see `composebox ls`)", task, tracking.DidYouMean(task, tasks)))
}
