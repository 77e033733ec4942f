package testutil

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// Resources counts the containers (running or not), networks and volumes carrying label
// ("key=value" or "key").
func Resources(t testing.TB, c client.APIClient, label string) int {
	t.Helper()
	n, err := Count(t.Context(), c, filters.Arg("label", label))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Count counts the containers (running or not), networks and volumes matching every filter.
func Count(ctx context.Context, c client.APIClient, f ...filters.KeyValuePair) (int, error) {
	args := filters.NewArgs(f...)
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return 0, err
	}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: args})
	if err != nil {
		return 0, err
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: args})
	if err != nil {
		return 0, err
	}
	return len(ctrs) + len(nets) + len(vols.Volumes), nil
}
