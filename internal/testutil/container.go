package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// ContainerOptions configures StartContainer. The zero value is a keep-alive container of the
// base image running as the image's default user (root).
type ContainerOptions struct {
	// Image defaults to the base image (BaseImage).
	Image string
	// User is the container's default user ("" = the image's).
	User string
	// WorkingDir overrides the image's working directory when set.
	WorkingDir string
	// Env is extra environment, as KEY=VALUE.
	Env []string
	// Cmd defaults to a keep-alive, `tail -f /dev/null`.
	Cmd []string
}

// Container is a running test container.
type Container struct {
	ID   string
	Name string
	// WorkingDir is the container's effective working directory (the image's when not set).
	WorkingDir string
	// User is the container's default user as configured ("" = the image's).
	User string
}

// StartContainer creates and starts a long-lived container with the composebox labels, an init
// process (so that stopping it is immediate) and no network, and waits until it is running. Its
// forced removal is registered with t.Cleanup before the container is even started, so a test
// that fails half way still leaves nothing behind.
func StartContainer(t testing.TB, c client.APIClient, opts ContainerOptions) Container {
	t.Helper()
	if opts.Image == "" {
		opts.Image = BaseImage(t)
	}
	if len(opts.Cmd) == 0 {
		opts.Cmd = []string{"tail", "-f", "/dev/null"}
	}
	ctx := context.Background()
	init := true
	stopTimeout := 1
	created, err := c.ContainerCreate(ctx, &container.Config{
		Image:       opts.Image,
		User:        opts.User,
		WorkingDir:  opts.WorkingDir,
		Env:         opts.Env,
		Cmd:         opts.Cmd,
		Labels:      Labels(t),
		StopTimeout: &stopTimeout,
	}, &container.HostConfig{NetworkMode: "none", Init: &init}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() { RemoveContainer(t, c, created.ID) })
	if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container %s: %v", created.ID, err)
	}
	info, err := WaitRunning(ctx, c, created.ID, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wd := info.Config.WorkingDir
	if wd == "" {
		wd = "/"
	}
	return Container{ID: created.ID, Name: info.Name[1:], WorkingDir: wd, User: opts.User}
}

// RemoveContainer force-removes a container (with its anonymous volumes). Not found counts as
// removed.
func RemoveContainer(t testing.TB, c client.APIClient, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !client.IsErrNotFound(err) {
		t.Errorf("remove container %s: %v", id, err)
	}
}

// WaitRunning polls the container's state until it runs, it exits, or timeout passes.
func WaitRunning(ctx context.Context, c client.APIClient, id string, timeout time.Duration) (container.InspectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	for {
		info, err := c.ContainerInspect(ctx, id)
		if err != nil {
			return info, fmt.Errorf("inspect container %s: %w", id, err)
		}
		switch {
		case info.State == nil:
		case info.State.Running:
			return info, nil
		case info.State.Status == "exited" || info.State.Status == "dead":
			return info, fmt.Errorf("container %s %s with code %d: %s", id, info.State.Status, info.State.ExitCode, info.State.Error)
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("container %s not running within %s: %w", id, timeout, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// WaitStopped polls the container's state until it is no longer running (or is gone).
func WaitStopped(ctx context.Context, c client.APIClient, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	for {
		info, err := c.ContainerInspect(ctx, id)
		if client.IsErrNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inspect container %s: %w", id, err)
		}
		if info.State != nil && !info.State.Running && !info.State.Restarting {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s still running after %s: %w", id, timeout, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
