package main

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
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
