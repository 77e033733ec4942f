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

// Sweep is backend.Sweep, the selection and sweep every backend shares, over this backend's
// Down (on the retrying client).
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	return backend.Sweep(ctx, b, sel, opts)
}

// FinishSweep removes the host firewall's rules of networks gone without their teardown
// finishing.
func (b *Backend) FinishSweep(ctx context.Context) error {
	_, err := cleanup.PruneHostFirewall(ctx, b.engine.Client())
	return err
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
