package tracking_test

import (
	"crypto/rand"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/images"
	"github.com/composebox/composebox/internal/images/imagespec"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

// buildTaskImage builds a task image as TaskInit does (labelled managed and task), FROM the base
// image with blobSize bytes of its own, removed at the end of the test.
func buildTaskImage(t *testing.T, c client.APIClient, task string, blobSize int) string {
	t.Helper()
	blob := make([]byte, blobSize)
	_, _ = rand.Read(blob)
	spec := imagespec.Spec{
		Repository: "cbx-" + task + "-default",
		Dockerfile: "ARG BASE\nFROM " + testutil.BaseImage(t) + "\nCOPY blob /blob\n",
		Files:      []imagespec.File{{Name: "blob", Mode: 0o644, Body: blob}},
		Labels:     map[string]string{labels.LabelManaged: "true", labels.LabelTask: task},
	}
	testutil.RemoveImage(t, c, spec.Tag())
	ref, _, err := images.NewBuilder(c).Ensure(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestPruneImages(t *testing.T) {
	c := testutil.Docker(t)
	task := unique("img")
	const blob = 300_000
	ref := buildTaskImage(t, c, task, blob)
	cache := tracking.OpenCache(t.TempDir())
	// As `cleanup --images` does: the tasks live now, then the prune.
	prune := func(dry bool) cleanup.ImageReport {
		t.Helper()
		live, err := tracking.LiveTasks(t.Context(), c, cache)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := cleanup.PruneImages(t.Context(), c, cleanup.ImageOptions{Task: task, Keep: live, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	exists := func() bool {
		_, err := c.ImageInspect(t.Context(), ref)
		return err == nil
	}

	// Held by a live process (between samples): kept.
	if err := cache.PutTask(tracking.TaskRecord{Task: task, Owner: labels.SelfOwner()}); err != nil {
		t.Fatal(err)
	}
	if rep := prune(false); len(rep.Removed) != 0 || len(rep.Kept) != 1 || !exists() {
		t.Fatalf("held task: %+v", rep)
	}
	if err := cache.DeleteTask(task, labels.SelfOwner()); err != nil {
		t.Fatal(err)
	}

	// A live project of the task: kept.
	live := fakeProject(t, c, fakeSpec{Task: task, Owner: labels.SelfOwner()})
	if rep := prune(false); len(rep.Removed) != 0 || len(rep.Kept) != 1 || !exists() {
		t.Fatalf("live project: %+v", rep)
	}
	if _, err := cleanup.RemoveProject(t.Context(), c, live, cleanup.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}

	// A stale project's container still uses it: kept, with the reason.
	dead := startOwner(t)
	stale := fakeProject(t, c, fakeSpec{Task: task, Owner: dead.label})
	dead.kill()
	user, err := c.ContainerCreate(t.Context(), &container.Config{Image: ref, Cmd: []string{"true"},
		Labels: map[string]string{labels.ComposeProjectLabel: stale, labels.LabelManaged: "true", labels.LabelTask: task, labels.LabelOwner: dead.label}},
		nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.RemoveContainer(t, c, user.ID) })
	if rep := prune(false); len(rep.Removed) != 0 || len(rep.Kept) != 1 || rep.Kept[0].Reason == "" || !exists() {
		t.Fatalf("image in use by a stale project: %+v", rep)
	}
	if _, err := tracking.Sweep(t.Context(), c, backend.Selector{Stale: true, Task: task}, cleanup.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}

	// No project left: a dry run reports it with its own size, and removes nothing.
	rep := prune(true)
	if len(rep.Removed) != 1 || !slices.Contains(rep.Removed[0].Tags, ref) || rep.BytesReclaimed < blob || !exists() {
		t.Fatalf("dry run: %+v (image present: %t)", rep, exists())
	}
	base, err := c.ImageInspect(t.Context(), testutil.BaseImage(t))
	if err != nil {
		t.Fatal(err)
	}
	if im := rep.Removed[0]; im.Size < base.Size+blob || im.UniqueSize < blob || im.UniqueSize >= im.Size {
		t.Errorf("sizes: whole %d, own %d; want the whole at least the base's %d plus %d, and its own less", im.Size, im.UniqueSize, base.Size, blob)
	}
	if rep.BytesReclaimed >= blob+base.Size {
		t.Errorf("dry run counts %d bytes: the base image's %d are shared", rep.BytesReclaimed, base.Size)
	}
	rep = prune(false)
	t.Logf("reclaimed %d bytes (estimated %d)", rep.BytesReclaimed, rep.Removed[0].UniqueSize)
	if len(rep.Removed) != 1 || rep.BytesReclaimed < blob || exists() {
		t.Fatalf("prune: %+v (image present: %t)", rep, exists())
	}
	if _, err := c.ImageInspect(t.Context(), testutil.BaseImage(t)); err != nil {
		t.Errorf("the base image went too: %v", err)
	}
	if rep := prune(false); len(rep.Removed) != 0 || rep.BytesReclaimed != 0 {
		t.Errorf("second prune: %+v", rep)
	}
}
