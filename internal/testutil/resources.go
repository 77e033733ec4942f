package testutil

import (
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
	f := filters.NewArgs(filters.Arg("label", label))
	ctrs, err := c.ContainerList(t.Context(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	nets, err := c.NetworkList(t.Context(), network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := c.VolumeList(t.Context(), volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(ctrs) + len(nets) + len(vols.Volumes)
}
