package cleanup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// ImageOptions tunes PruneImages.
type ImageOptions struct {
	// Task limits image hygiene to one task's images.
	Task string
	// Keep maps each live task, whose images must stay, to why it is live. tracking.LiveTasks
	// gives the tasks with a project that is not stale or held by a live process; without it,
	// only the images a container uses are kept.
	Keep map[string]string
	// DryRun reports what would be removed, with estimated sizes, and removes nothing.
	DryRun bool
}

// Image is one image that image hygiene removed or kept; ImageReport is the outcome of
// PruneImages. Both are the backend boundary's own types, which the Docker backend returns as
// they are.
type (
	Image       = backend.PrunedImage
	ImageReport = backend.ImageReport
)

// PruneImages removes the images composebox built for tasks that are not live: images labelled
// dev.composebox.managed=true with a non-empty task label, never composebox's own images (the
// base image, whose task label is empty). The images of a task in opts.Keep are kept, and so is
// an image still used by a container (a stale project's, say), with the reason: remove the
// stale projects first. The removal is the engine's image prune, per task, so the bytes
// reported are the engine's own count.
func PruneImages(ctx context.Context, c client.APIClient, opts ImageOptions) (ImageReport, error) {
	rep := ImageReport{Removed: []Image{}}
	f := filters.NewArgs(filters.Arg("label", labels.ManagedFilter))
	if opts.Task != "" {
		f.Add("label", labels.LabelTask+"="+opts.Task)
	}
	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return rep, fmt.Errorf("prune images: list: %w", err)
	}
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return rep, fmt.Errorf("prune images: list containers: %w", err)
	}
	usedBy := map[string]string{}
	for _, x := range ctrs {
		usedBy[x.ImageID] = ContainerName(x)
	}

	byTask := map[string][]Image{}
	for _, img := range imgs {
		// composebox's own images (the base image) have an empty task label. LabelImage cannot
		// tell them apart: an image built FROM the base image inherits its labels.
		task := img.Labels[labels.LabelTask]
		if task == "" {
			continue
		}
		tags := slices.DeleteFunc(slices.Clone(img.RepoTags), func(t string) bool { return t == "<none>:<none>" })
		im := Image{ID: img.ID, Tags: tags, Task: task, Size: img.Size}
		switch {
		case opts.Keep[task] != "":
			im.Reason = opts.Keep[task]
		case usedBy[img.ID] != "":
			im.Reason = fmt.Sprintf("used by container %s (remove its project first, e.g. cleanup --stale)", usedBy[img.ID])
		}
		if im.Reason != "" {
			rep.Kept = append(rep.Kept, im)
			continue
		}
		im.UniqueSize = img.Size
		if size, err := uniqueSize(ctx, c, img.ID); err == nil {
			im.UniqueSize = size
		}
		byTask[task] = append(byTask[task], im)
	}

	tasks := slices.Sorted(maps.Keys(byTask))
	if opts.DryRun {
		for _, t := range tasks {
			for _, im := range byTask[t] {
				rep.Removed = append(rep.Removed, im)
				rep.BytesReclaimed += im.UniqueSize
			}
		}
		return rep, nil
	}
	var errs *multierror.Error
	for _, t := range tasks {
		report, err := pruneTask(ctx, c, t)
		if err != nil {
			errs = multierror.Append(errs, err)
			continue
		}
		rep.BytesReclaimed += int64(report.SpaceReclaimed)
		deleted := map[string]bool{}
		for _, d := range report.ImagesDeleted {
			if d.Deleted != "" {
				deleted[d.Deleted] = true
			}
		}
		for _, im := range byTask[t] {
			if deleted[im.ID] {
				rep.Removed = append(rep.Removed, im)
			} else {
				im.Reason = "in use"
				rep.Kept = append(rep.Kept, im)
			}
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return rep, fmt.Errorf("prune images: %w", err)
	}
	return rep, nil
}

// pruneTask has the engine prune task's unused images. The engine runs one prune at a time and
// refuses a concurrent one with a conflict, so that is retried for a while.
func pruneTask(ctx context.Context, c client.APIClient, task string) (image.PruneReport, error) {
	f := filters.NewArgs(
		filters.Arg("dangling", "false"),
		filters.Arg("label", labels.ManagedFilter),
		filters.Arg("label", labels.LabelTask+"="+task),
	)
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := c.ImagesPrune(ctx, f)
		if err == nil || !errdefs.IsConflict(err) || time.Now().After(deadline) {
			if err != nil {
				return rep, fmt.Errorf("prune images of task %s: %w", task, err)
			}
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("prune images of task %s: %w", task, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// uniqueSize estimates the bytes only id holds: the sizes of its history's layers above the
// first tagged ancestor (the image it was built FROM).
func uniqueSize(ctx context.Context, c client.APIClient, id string) (int64, error) {
	hist, err := c.ImageHistory(ctx, id)
	if err != nil {
		return 0, err
	}
	var n int64
	for i, h := range hist {
		if i > 0 && len(h.Tags) > 0 && !slices.ContainsFunc(h.Tags, func(t string) bool { return strings.HasPrefix(t, "<none>") }) {
			break
		}
		n += h.Size
	}
	return n, nil
}
