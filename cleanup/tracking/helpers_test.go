package tracking_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Every project and task these tests create is named with this prefix, so that the leak check
// (and nothing else) can tell them from other runs' resources on a shared engine.
const prefix = "cbxt-"

// TestMain fails the package if its tests left any of their projects behind.
func TestMain(m *testing.M) { testutil.LeakCheck(m, leftovers) }

func leftovers(ctx context.Context, c client.APIClient) error {
	projects, err := tracking.List(ctx, c)
	if err != nil {
		return err
	}
	var left []string
	for _, p := range projects {
		if strings.HasPrefix(p.Name, prefix) || strings.HasPrefix(p.Task, prefix) {
			left = append(left, p.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("projects left behind: %v", left)
	}
	return nil
}

func unique(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + name + "-" + hex.EncodeToString(b[:])
}

// owner is a process standing in for a sample's owner: a `sleep` whose owner label is known.
type owner struct {
	cmd   *exec.Cmd
	label string
}

// startOwner starts a process to own projects; it is killed at the end of the test.
func startOwner(t *testing.T) *owner {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &owner{cmd: cmd}
	t.Cleanup(func() { o.kill() })
	start, err := labels.ProcessStartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	o.label = fmt.Sprintf("%s:%d:%d", host, cmd.Process.Pid, start)
	return o
}

// kill kills the owner with SIGKILL and reaps it.
func (o *owner) kill() {
	if o.cmd.ProcessState != nil {
		return
	}
	_ = o.cmd.Process.Kill()
	_ = o.cmd.Wait()
}

// fakeSpec is a project made directly through the Engine API, with the labels composebox
// stamps: quicker than a compose Up, and any owner label can be chosen.
type fakeSpec struct {
	Task       string
	Owner      string
	Containers int  // keep-alive containers on the project's network
	Volume     bool // one named volume
}

// fakeProject creates a project and registers its removal before creating anything.
func fakeProject(t *testing.T, c client.APIClient, spec fakeSpec) string {
	t.Helper()
	project := unique("p")
	t.Cleanup(func() {
		if _, err := cleanup.RemoveProject(context.Background(), c, project, cleanup.RemoveOptions{Grace: -1}); err != nil {
			t.Errorf("remove %s: %v", project, err)
		}
	})
	if err := makeFake(context.Background(), c, testutil.BaseImage(t), project, spec); err != nil {
		t.Fatal(err)
	}
	return project
}

// fakeProjects creates n projects at once.
func fakeProjects(t *testing.T, c client.APIClient, n int, spec fakeSpec) []string {
	t.Helper()
	base := testutil.BaseImage(t)
	projects := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range projects {
		projects[i] = unique("p")
		t.Cleanup(func() {
			if _, err := cleanup.RemoveProject(context.Background(), c, projects[i], cleanup.RemoveOptions{Grace: -1}); err != nil {
				t.Errorf("remove %s: %v", projects[i], err)
			}
		})
		wg.Go(func() { errs[i] = makeFake(context.Background(), c, base, projects[i], spec) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return projects
}

func makeFake(ctx context.Context, c client.APIClient, image, project string, spec fakeSpec) error {
	lbl := map[string]string{
		labels.ComposeProjectLabel: project,
		labels.LabelManaged:        "true",
		labels.LabelTask:           spec.Task,
		labels.LabelSample:         "s-" + project,
		labels.LabelOwner:          spec.Owner,
		labels.LabelCreated:        time.Now().UTC().Format(time.RFC3339),
	}
	net := project + "_default"
	if _, err := c.NetworkCreate(ctx, net, network.CreateOptions{Labels: lbl}); err != nil {
		return fmt.Errorf("create network: %w", err)
	}
	if spec.Volume {
		if _, err := c.VolumeCreate(ctx, volume.CreateOptions{Name: project + "_data", Labels: lbl}); err != nil {
			return fmt.Errorf("create volume: %w", err)
		}
	}
	init := true
	for i := range spec.Containers {
		created, err := c.ContainerCreate(ctx, &container.Config{
			Image: image, Cmd: []string{"tail", "-f", "/dev/null"}, Labels: lbl,
		}, &container.HostConfig{Init: &init, NetworkMode: container.NetworkMode(net)}, nil, nil, fmt.Sprintf("%s-svc%d-1", project, i))
		if err != nil {
			return fmt.Errorf("create container: %w", err)
		}
		if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			return fmt.Errorf("start container: %w", err)
		}
	}
	return nil
}

func projectLabel(p string) string { return labels.ComposeProjectLabel + "=" + p }

// find returns the listed project named name.
func find(t *testing.T, c client.APIClient, name string) (backend.Project, bool) {
	t.Helper()
	all, err := tracking.List(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Name == name {
			return p, true
		}
	}
	return backend.Project{}, false
}

func names(ps []backend.Project) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
