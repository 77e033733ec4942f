package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

// TestCleanupFindsSnapshotLeftoversOfACrash leaves what a snapshot commits as a process that
// died mid-way would: (1) a snapshot kept for a task, whose owner project has nothing but the
// snapshot, and (2) a sample being started from a snapshot, of which only the tag it would run
// exists (the process died between the tag and the first container). `cleanup --stale` lists
// both in a dry run and then removes them, and only them: the live sample they were taken from
// and its own snapshot stay.
func TestCleanupFindsSnapshotLeftoversOfACrash(t *testing.T) {
	o := newLib(t)
	c := o.Client()
	task := uniqueTask("snapcrash")
	src := samples(t, o, task, forkVolumeTask, 1)[0]
	fk, ok := backend.AsForker(o.Backend())
	if !ok {
		t.Fatal("the Docker backend is not a Forker")
	}
	host, _ := os.Hostname()
	dead := labels.Owner{Host: host, PID: os.Getpid(), Start: 1}.String()
	kept := compose.ProjectName(task, compose.NewSampleID())
	starting := compose.ProjectName(task, compose.NewSampleID())
	for _, p := range []string{kept, starting} {
		t.Cleanup(func() { _, _ = cleanup.RemoveProject(context.Background(), c, p, cleanup.RemoveOptions{}) })
	}

	// (1) The commit step of a snapshot a task keeps, by a process now dead.
	if _, err := fk.Snapshot(t.Context(), backend.SnapshotRequest{Project: src.Project(), Name: "kept", Owner: kept, Task: task, Process: dead}); err != nil {
		t.Fatal(err)
	}
	// (2) The source's own snapshot, committed by the dead process, and the first step of a
	// sample started from it: the tag it would run, and nothing else.
	st, err := fk.Snapshot(t.Context(), backend.SnapshotRequest{Project: src.Project(), Name: "own", Owner: src.Project(), Task: task, Process: dead})
	if err != nil {
		t.Fatal(err)
	}
	delete(st.Volumes, "site") // a crash before the volume copies
	target := &types.Project{Name: starting, Services: types.Services{"default": {Name: "default", Image: "x"}}}
	if err := fk.Restore(t.Context(), st, target); err != nil {
		t.Fatal(err)
	}
	if n := stateTags(t, c, starting); n != 1 {
		t.Fatalf("the interrupted start has %d tags, want 1", n)
	}

	res := cleanupJSON(t, "--stale", "--task", task, "--dry-run")
	if got := removedNames(res); !slices.Contains(got, kept) || !slices.Contains(got, starting) || slices.Contains(got, src.Project()) {
		t.Fatalf("dry run lists %v; want %s and %s, not the live %s", got, kept, starting, src.Project())
	}
	if n := stateTags(t, c, kept) + stateTags(t, c, starting); n == 0 {
		t.Fatal("the dry run removed the leftovers' tags")
	}

	res = cleanupJSON(t, "--stale", "--task", task)
	if got := removedNames(res); !slices.Contains(got, kept) || !slices.Contains(got, starting) || slices.Contains(got, src.Project()) {
		t.Fatalf("cleanup --stale removed %v; want %s and %s, not the live %s", got, kept, starting, src.Project())
	}
	for _, p := range []string{kept, starting} {
		if n := stateTags(t, c, p); n != 0 {
			t.Errorf("%s: %d snapshot tags left", p, n)
		}
		vols, err := c.VolumeList(t.Context(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", projectLabel(p)))})
		if err != nil || len(vols.Volumes) != 0 {
			t.Errorf("%s: volumes left: %d (%v)", p, len(vols.Volumes), err)
		}
	}
	// The kept snapshot's images had no other tag: gone. The source's own snapshot stays with
	// its live sample.
	if n := stateTags(t, c, src.Project()); n != 2 {
		t.Errorf("the live source has %d snapshot tags, want its own snapshot's 2", n)
	}
	imgs, err := c.ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelStateTask+"="+task))})
	if err != nil || len(imgs) != 2 {
		t.Errorf("%d images of the task's snapshots left, want the source's 2 (%v)", len(imgs), err)
	}
	// Its removal takes the rest.
	if err := src.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	imgs, err = c.ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelStateTask+"="+task))})
	if err != nil || len(imgs) != 0 {
		t.Errorf("%d images of the task's snapshots left after the last user went (%v)", len(imgs), err)
	}
}

// forkVolumeTask is two services, one with a named volume.
const forkVolumeTask = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["site:/www"]
volumes:
  site: {}
`

// stateTags counts the tags in project's snapshot repository.
func stateTags(t *testing.T, c interface {
	ImageList(context.Context, image.ListOptions) ([]image.Summary, error)
}, project string) int {
	t.Helper()
	imgs, err := c.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", cleanup.StateRepo(project)))})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if p, ok := cleanup.StateProject(tag); ok && p == project {
				n++
			}
		}
	}
	return n
}

// TestUpFromSnapshotAndWarmPoolFromIt: `up --from-snapshot` starts a sample at a snapshot that
// another process took, and `up --warm 1 --from-snapshot` keeps a pool whose samples have the
// snapshot's files, after the snapshot's sample is gone; once the pool ends and the last sample
// from the snapshot goes, nothing the snapshot committed is left.
func TestUpFromSnapshotAndWarmPoolFromIt(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	task := uniqueTask("upsnap")
	removeTaskProjects(t, c, task)
	dir := filepath.Join("..", "..", "testdata", "projects", "multi-service")
	src := upJSON(t, "--task", task, dir).Project
	if code, _, errOut := runCLI(t, "exec", "-p", src, "--", "sh", "-c", "echo snap-state > /tmp/state"); code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "snapshot", "-p", src, "s1"); code != 0 {
		t.Fatalf("snapshot: %d %s", code, errOut)
	}
	from := upJSON(t, "--task", task, "--from-snapshot", src+":s1", dir).Project
	if code, out, errOut := runCLI(t, "exec", "-p", from, "--", "cat", "/tmp/state"); code != 0 || out != "snap-state\n" {
		t.Errorf("up --from-snapshot: %d %q %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "up", "--task", task, "--from-snapshot", src+":nope", dir); code == 0 || !strings.Contains(errOut, "not_found") {
		t.Errorf("up from a missing snapshot: exit %d, %s", code, errOut)
	}

	// The pool, until it is interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		done <- run(ctx, []string{"up", "--task", task, "--warm", "1", "--from-snapshot", src + ":s1", dir}, strings.NewReader(""), &out, &errb)
	}()
	var warm []string
	if !poll(2*time.Minute, func() bool { warm = warmOf(lsJSON(t, task), labels.SelfOwner()); return len(warm) == 1 }) {
		t.Fatalf("no warm sample of the pool from the snapshot: %v", lsJSON(t, task))
	}
	// The snapshot's sample goes; the pool's copy stays with the pool.
	if code, _, errOut := runCLI(t, "down", src); code != 0 {
		t.Fatalf("down %s: %d %s", src, code, errOut)
	}
	if code, out, errOut := runCLI(t, "exec", "-p", warm[0], "--", "cat", "/tmp/state"); code != 0 || out != "snap-state\n" {
		t.Errorf("the pool's sample %s: %d %q %s", warm[0], code, out, errOut)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("up --warm: exit %d", code)
	}
	// What is left of the task: the two handed-over samples from the snapshot, which hold its
	// images. They go, and the images with them.
	left := lsJSON(t, task)
	if len(left) != 2 {
		t.Errorf("after the pool ended: %d projects of the task, want the 2 handed-over samples: %v", len(left), left)
	}
	imgs, err := c.ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelStateTask+"="+task))})
	if err != nil || len(imgs) == 0 {
		t.Errorf("the snapshot's images went while samples from it live: %d (%v)", len(imgs), err)
	}
	for name := range left {
		if code, _, errOut := runCLI(t, "down", name); code != 0 {
			t.Errorf("down %s: %d %s", name, code, errOut)
		}
	}
	imgs, err = c.ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelStateTask+"="+task))})
	if err != nil || len(imgs) != 0 {
		t.Errorf("%d images of the snapshot left after its last user went (%v)", len(imgs), err)
	}
	vols, err := c.VolumeList(t.Context(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelState), filters.Arg("label", taskLabel(task)))})
	if err != nil || len(vols.Volumes) != 0 {
		t.Errorf("%d snapshot volumes left (%v)", len(vols.Volumes), err)
	}
}
