// Package testutil holds helpers for tests that run against the real engine. Every resource a
// helper creates carries the composebox labels and is removed by t.Cleanup, registered before
// the helper returns or asserts anything.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/images"
)

// Docker returns a client to the live daemon, after really pinging it. The test fails (it is
// not skipped: the suite exists to run against a real engine) when there is none.
func Docker(t testing.TB) client.APIClient {
	t.Helper()
	c, _, err := engine.Connect(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatalf("docker engine required: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var (
	baseOnce sync.Once
	baseRef  string
	baseErr  error
)

// BaseImage builds (once per test binary) and returns the base image. It is left in place
// after the tests: it is content-addressed and shared by every run.
func BaseImage(t testing.TB) string {
	t.Helper()
	baseOnce.Do(func() {
		c, _, err := engine.Connect(context.Background(), 5*time.Second)
		if err != nil {
			baseErr = err
			return
		}
		defer c.Close()
		baseRef, baseErr = images.NewBuilder(c).Base(context.Background())
	})
	if baseErr != nil {
		t.Fatalf("build base image: %v", baseErr)
	}
	return baseRef
}

// Labels are the labels for a resource created directly by a test.
func Labels(t testing.TB) map[string]string {
	return map[string]string{
		labels.LabelManaged: "true",
		labels.LabelTask:    "test",
		labels.LabelSample:  t.Name(),
		labels.LabelOwner:   labels.SelfOwner(),
		labels.LabelCreated: time.Now().UTC().Format(time.RFC3339),
	}
}

// RunResult is a finished container's outcome.
type RunResult struct {
	ExitCode int64
	Stdout   string
	Stderr   string
}

// Run runs cmd in a new container of image as user and waits for it to exit.
func Run(t testing.TB, c client.APIClient, image, user string, cmd ...string) RunResult {
	t.Helper()
	ctx := context.Background()
	created, err := c.ContainerCreate(ctx, &container.Config{
		Image: image, User: user, Cmd: cmd, Labels: Labels(t),
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() {
		err := c.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
		if err != nil && !client.IsErrNotFound(err) {
			t.Errorf("remove container %s: %v", created.ID, err)
		}
	})
	waitC, errC := c.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	var res RunResult
	select {
	case w := <-waitC:
		res.ExitCode = w.StatusCode
	case err := <-errC:
		t.Fatalf("wait container: %v", err)
	}
	logs, err := c.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("container logs: %v", err)
	}
	defer logs.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, logs); err != nil {
		t.Fatalf("read logs: %v", err)
	}
	res.Stdout, res.Stderr = out.String(), errb.String()
	return res
}

// RemoveImage registers the removal of ref at the end of the test.
func RemoveImage(t testing.TB, c client.APIClient, ref string) {
	t.Cleanup(func() {
		_, err := c.ImageRemove(context.Background(), ref, imageRemoveOptions())
		if err != nil && !client.IsErrNotFound(err) {
			t.Errorf("remove image %s: %v", ref, err)
		}
	})
}

// String is a short description of a result for failure messages.
func (r RunResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
}
