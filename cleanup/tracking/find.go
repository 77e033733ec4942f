package tracking

import (
	"context"
	"fmt"
	"slices"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
)

// ProjectsOf names every composebox project of task owned by owner, from its containers,
// networks and volumes, so that a project with only a leftover network is found too. A project
// handed over as detached (MarkDetached) is no longer the owner's and is left out.
func ProjectsOf(ctx context.Context, c client.APIClient, task, owner string) ([]string, error) {
	f := filters.NewArgs(
		filters.Arg("label", labels.ManagedFilter),
		filters.Arg("label", labels.LabelTask+"="+task),
		filters.Arg("label", labels.LabelOwner+"="+owner),
	)
	seen := map[string]bool{}
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("find projects of task %s: %w", task, err)
	}
	for _, x := range ctrs {
		seen[x.Labels[labels.ComposeProjectLabel]] = true
	}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("find projects of task %s: %w", task, err)
	}
	for _, x := range nets {
		seen[x.Labels[labels.ComposeProjectLabel]] = true
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("find projects of task %s: %w", task, err)
	}
	for _, x := range vols.Volumes {
		seen[x.Labels[labels.ComposeProjectLabel]] = true
	}
	delete(seen, "")
	detached, err := detachedProjects(ctx, c, task)
	if err != nil {
		return nil, fmt.Errorf("find projects of task %s: %w", task, err)
	}
	for p := range detached {
		delete(seen, p)
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}
