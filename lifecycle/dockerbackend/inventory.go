package dockerbackend

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/orchestrator/backend"
)

func labelFilter(sel []string) filters.Args {
	f := filters.NewArgs()
	for _, l := range sel {
		f.Add("label", l)
	}
	return f
}

// OwnedProjects is tracking.ProjectsOf, on the retrying client: a teardown rides out the
// daemon's hiccups.
func (b *Backend) OwnedProjects(ctx context.Context, task, owner string) ([]string, error) {
	return tracking.ProjectsOf(ctx, b.engine.Client(), task, owner)
}

// ListProjects is tracking.List.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	list, err := tracking.List(ctx, b.raw)
	out := make([]backend.Project, len(list))
	for i, p := range list {
		out[i] = b.project(p)
	}
	return out, err
}

// Sweep is tracking.Sweep on the retrying client; with DryRun, tracking.Plan.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	tsel := tracking.Selector{Names: sel.Names, All: sel.All, Stale: sel.Stale, Task: sel.Task, OlderThan: sel.OlderThan}
	if opts.DryRun {
		planned, err := tracking.Plan(ctx, b.raw, tsel)
		out := make([]backend.SweepResult, len(planned))
		for i, p := range planned {
			out[i] = backend.SweepResult{Project: b.project(p)}
		}
		return out, err
	}
	res, err := tracking.Sweep(ctx, b.engine.Client(), tsel, cleanup.RemoveOptions{Grace: opts.Grace})
	out := make([]backend.SweepResult, len(res))
	for i, r := range res {
		out[i] = backend.SweepResult{Project: b.project(r.Project), Removed: removed(r.Removed), Err: r.Err}
	}
	return out, err
}

// ListImages lists the images whose labels match sel.
func (b *Backend) ListImages(ctx context.Context, sel []string) ([]backend.ImageInfo, error) {
	imgs, err := b.engine.Client().ImageList(ctx, image.ListOptions{Filters: labelFilter(sel)})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]backend.ImageInfo, len(imgs))
	for i, im := range imgs {
		out[i] = backend.ImageInfo{ID: im.ID, Labels: im.Labels}
	}
	return out, nil
}

// PruneImages is cleanup.PruneImages on the retrying client.
func (b *Backend) PruneImages(ctx context.Context, opts backend.PruneImagesOptions) (backend.ImageReport, error) {
	return cleanup.PruneImages(ctx, b.engine.Client(), cleanup.ImageOptions{Task: opts.Task, Keep: opts.Keep, DryRun: opts.DryRun})
}

// project is p as the boundary has it, named after this engine.
func (b *Backend) project(p tracking.Project) backend.Project {
	bp := p.Backend()
	bp.Engine = b.name
	return bp
}
