package orchestrator_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/internal/engine"
)

// TestMain fails the package if its tests left any resource owned by this process behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := leftovers(); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func leftovers() error {
	ctx := context.Background()
	c, _, err := engine.Connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	f := filters.NewArgs(filters.Arg("label", cleanup.LabelOwner+"="+cleanup.SelfOwner()))
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return err
	}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return err
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return err
	}
	if len(ctrs)+len(nets)+len(vols.Volumes) > 0 {
		return fmt.Errorf("%d containers, %d networks, %d volumes left behind", len(ctrs), len(nets), len(vols.Volumes))
	}
	return nil
}
