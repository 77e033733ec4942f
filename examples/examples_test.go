// Package examples_test builds and runs every program under examples/ against the real engine,
// so that the programs the docs point to keep compiling and keep doing what they say.
package examples_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

func TestQuickstart(t *testing.T) {
	out := runExample(t, "quickstart", "example-quickstart")
	for _, want := range []string{"event: sample_healthy cbx-example-quickstart-", "exit 0: hello from web\n", "read back: cbx{example}\n", "enter web with: docker exec -it "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWarmpool(t *testing.T) {
	out := runExample(t, "warmpool", "example-warmpool")
	for _, want := range []string{"sample episode-17 (cbx-example-warmpool-", ": ready\n", "pool: target 2, "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestDemo runs `make demo`'s program on a copy of its project, under a task name of its own
// (the directory's name), so that removing what it may leave never touches another test's.
func TestDemo(t *testing.T) {
	task := "cbxexample-demo-" + randomHex(t)
	dir := filepath.Join(t.TempDir(), task)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(repoRoot(t), "testdata", "projects", "multi-service"))); err != nil {
		t.Fatal(err)
	}
	c := testutil.Docker(t)
	// The demo builds web's image for its task; the image is the test's to remove.
	t.Cleanup(func() { removeTaskImages(t, c, task) })
	out := runExample(t, "demo", task, dir)
	for _, want := range []string{`"hello from web"`, `"pong"`, "equal=true", "sample cleanup", "task cleanup"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// runExample builds examples/name, runs it from the repository's root with args, and returns
// its stdout. Whatever the program leaves of task is removed at the end of the test, and
// anything left at all fails the test.
func runExample(t *testing.T, name, task string, args ...string) string {
	t.Helper()
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	t.Cleanup(func() {
		// t.Context() has ended by now: cleanups run on a context of their own.
		left, err := testutil.Count(context.Background(), c, filters.Arg("label", labels.LabelTask+"="+task))
		if err != nil {
			t.Errorf("count what examples/%s left: %v", name, err)
		}
		if _, err := tracking.Sweep(context.Background(), c, backend.Selector{All: true, Task: task}, cleanup.RemoveOptions{}); err != nil {
			t.Errorf("remove projects of %s: %v", task, err)
		}
		if left != 0 {
			t.Errorf("examples/%s left %d containers, networks or volumes of task %s", name, left, task)
		}
	})
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), name)
	build := exec.CommandContext(t.Context(), goTool(), "build", "-o", bin, "./examples/"+name)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/%s: %v\n%s", name, err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "COMPOSEBOX_STATE_DIR="+t.TempDir())
	// SIGINT first, as a user's Ctrl-C: the program then removes what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("examples/%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func removeTaskImages(t *testing.T, c client.APIClient, task string) {
	ctx := context.Background()
	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelTask+"="+task))})
	if err != nil {
		t.Errorf("list images of %s: %v", task, err)
		return
	}
	for _, img := range imgs {
		if _, err := c.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove image %s of %s: %v", img.ID, task, err)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
