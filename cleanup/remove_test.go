package cleanup_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
)

// A project's network that still has an endpoint once its containers are gone (here a container
// of another project connected to it) is removed anyway: the endpoint is disconnected, and the
// container it belonged to is left alone.
func TestRemoveProjectDisconnectsForeignEndpoints(t *testing.T) {
	c := testutil.Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	project := "cbx-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	l := maps.Clone(testutil.Labels(t))
	l[labels.ComposeProjectLabel] = project
	n, err := c.NetworkCreate(ctx, project+"_default", network.CreateOptions{Labels: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.NetworkRemove(context.Background(), n.ID); err != nil && !client.IsErrNotFound(err) {
			t.Errorf("remove network: %v", err)
		}
	})
	// Another project's container (the test's own labels, not this project's) on the network.
	foreign, err := c.ContainerCreate(ctx, &container.Config{
		Image: testutil.BaseImage(t), Cmd: []string{"tail", "-f", "/dev/null"}, Labels: testutil.Labels(t),
	}, &container.HostConfig{NetworkMode: container.NetworkMode(n.ID)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.RemoveContainer(t, c, foreign.ID) })
	if err := c.ContainerStart(ctx, foreign.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	got, err := cleanup.RemoveProject(ctx, c, project, cleanup.RemoveOptions{})
	if err != nil {
		t.Fatalf("RemoveProject: %v", err)
	}
	if got.Networks != 1 {
		t.Errorf("removed %d networks, want 1", got.Networks)
	}
	if _, err := c.NetworkInspect(ctx, n.ID, network.InspectOptions{}); !client.IsErrNotFound(err) {
		t.Errorf("network still there: %v", err)
	}
	if info, err := c.ContainerInspect(ctx, foreign.ID); err != nil || !info.State.Running {
		t.Errorf("the foreign container was touched: %v", err)
	}
}
