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

// ListProjects is tracking.List, each project named after this engine.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	list, err := tracking.List(ctx, b.raw)
	for i := range list {
		list[i].Engine = b.name
	}
	return list, err
}

// Sweep is tracking.Sweep on the retrying client; with DryRun, tracking.Plan.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	if opts.DryRun {
		planned, err := tracking.Plan(ctx, b.raw, sel)
		out := make([]backend.SweepResult, len(planned))
		for i, p := range planned {
			out[i] = backend.SweepResult{Project: p}
			out[i].Engine = b.name
		}
		return out, err
	}
	res, err := tracking.Sweep(ctx, b.engine.Client(), sel, cleanup.RemoveOptions{Grace: opts.Grace})
	for i := range res {
		res[i].Engine = b.name
	}
	return res, err
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
