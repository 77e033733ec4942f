package tracking

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
)

// Engine labels cannot be changed after a resource is created, so a project is handed over by
// adding a resource rather than relabelling its own: an empty marker volume carrying the
// project's labels with the owner "detached". List reports a project with a marker as detached
// (never stale), the reaper and Task.Cleanup's sweep leave it alone, and RemoveProject removes
// the marker with the project's other volumes.

// DetachedVolume is the name of project's detach marker volume (see markerName).
func DetachedVolume(project string) string { return markerName(markerDetached, project) }

// MarkDetached hands project over as detached: from now on it is never stale, and only an
// explicit removal (`down`, `cleanup PROJECT`, `cleanup --all`) removes it. It is idempotent.
func MarkDetached(ctx context.Context, c client.APIClient, project, task, sample string) error {
	err := createMarker(ctx, c, DetachedVolume(project), map[string]string{
		labels.ComposeProjectLabel: project,
		labels.LabelManaged:        "true",
		labels.LabelTask:           task,
		labels.LabelSample:         sample,
		labels.LabelOwner:          labels.OwnerDetached,
		labels.LabelCreated:        time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return fmt.Errorf("detach project %s: create marker volume: %w", project, err)
	}
	return nil
}

// detachedProjects names the projects that carry a detach marker (of task, when not empty).
func detachedProjects(ctx context.Context, c client.APIClient, task string) (map[string]bool, error) {
	f := filters.NewArgs(filters.Arg("label", labels.ManagedFilter), filters.Arg("label", labels.LabelOwner+"="+labels.OwnerDetached))
	if task != "" {
		f.Add("label", labels.LabelTask+"="+task)
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list detached projects: %w", err)
	}
	out := map[string]bool{}
	for _, v := range vols.Volumes {
		if isMarker(v.Name, v.Labels, markerDetached) {
			out[v.Labels[labels.ComposeProjectLabel]] = true
		}
	}
	return out, nil
}
