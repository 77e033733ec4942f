package orchestrator_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator"
)

// uniqueName is name with a random suffix: what a test counts by its task's labels is then its
// own, whatever else runs on the engine.
func uniqueName(name string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

// snapshotArtifacts counts, through the engine, the images a snapshot of task committed and the
// volumes holding a snapshot's copies, by the labels they carry.
func snapshotArtifacts(t *testing.T, o *orchestrator.Orchestrator, task string) (images, volumes int) {
	t.Helper()
	c := o.Client()
	imgs, err := c.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", labels.LabelStateImage+"=true"), filters.Arg("label", labels.LabelStateTask+"="+task))})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := c.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", labels.LabelState), filters.Arg("label", labels.LabelTask+"="+task))})
	if err != nil {
		t.Fatal(err)
	}
	return len(imgs), len(vols.Volumes)
}

// TestWarmPoolFromSnapshot fills a pool from a sample's snapshot, removes the sample, and takes
// from the pool: each sample handed out has the snapshot's files and volume content, and
// nothing the snapshot committed outlives the task.
func TestWarmPoolFromSnapshot(t *testing.T) {
	o, rec := newOrchestrator(t)
	name := uniqueName("poolsnap")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(forkTask)})
	src := startSamples(t, task, 1)[0]
	sh(t, src.Default(), "echo from-snapshot > /root/state")
	sh(t, sandbox(t, src, "web"), "echo page-snap > /www/page")
	snap, err := src.Snapshot(t.Context(), "base")
	if err != nil {
		t.Fatal(err)
	}
	if snap.KeptByTask() {
		t.Error("a snapshot taken with no options is the task's; want its sample's")
	}
	if err := task.Prewarm(t.Context(), 2, orchestrator.PrewarmOptions{From: snap}); err != nil {
		t.Fatal(err)
	}
	// The pool keeps a copy of its own: the sample and its snapshot may go.
	if err := src.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitPool(t, task, "two ready", full(2))
	if imgs, _ := snapshotArtifacts(t, o, name); imgs == 0 {
		t.Fatal("no snapshot image left while the pool fills from it")
	}
	for i := range 3 { // the third starts from the snapshot too, warm or cold
		s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
		if got := sh(t, s.Default(), "cat /root/state; wget -q -O - http://web/page"); got != "from-snapshot\npage-snap\n" {
			t.Errorf("sample %d (%s) from the pool: %q, want the snapshot's file and volume", i, s.Project(), got)
		}
	}
	if n := rec.count(orchestrator.EventPoolTaken); n < 2 {
		t.Errorf("%d takes from the pool, want at least 2", n)
	}
	// Back to plain samples: the pool drops what it holds from the snapshot.
	if err := task.Prewarm(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	waitPool(t, task, "one plain ready", full(1))
	plain, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Cleanup(context.Background()) })
	if got := sh(t, plain.Default(), "cat /root/state 2>/dev/null || echo none"); got != "none\n" {
		t.Errorf("a plain pool's sample has %q, want no snapshot file", got)
	}

	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if imgs, vols := snapshotArtifacts(t, o, name); imgs != 0 || vols != 0 {
		t.Errorf("after Task.Cleanup: %d snapshot images and %d snapshot volumes left", imgs, vols)
	}
}

// TestSnapshotsLiveWithTheirLastUser: what a snapshot committed stays while a sample started from
// it lives, whoever owned the snapshot, and goes with the last such sample.
func TestSnapshotsLiveWithTheirLastUser(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := uniqueName("snapref")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(forkTask)})
	ss := startSamples(t, task, 2)
	a, c := ss[0], ss[1]
	sh(t, a.Default(), "echo a-state > /root/state")
	sh(t, c.Default(), "echo c-state > /root/state")

	// A snapshot its sample owns: the sample goes, a sample started from it stays.
	snapA, err := a.Snapshot(t.Context(), "mine")
	if err != nil {
		t.Fatal(err)
	}
	b, err := task.SampleFrom(t.Context(), snapA, orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Cleanup(context.Background()) })
	if err := a.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if imgs, _ := snapshotArtifacts(t, o, name); imgs != 2 {
		t.Errorf("after its sample's Cleanup, with a sample from it alive: %d snapshot images, want its 2", imgs)
	}
	if _, err := task.SampleFrom(t.Context(), snapA, orchestrator.SampleSpec{}); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("sample from a snapshot removed with its sample: %v, want not found", err)
	}
	if got := sh(t, b.Default(), "cat /root/state"); got != "a-state\n" {
		t.Errorf("the sample from the snapshot: %q", got)
	}
	if err := b.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if imgs, vols := snapshotArtifacts(t, o, name); imgs != 0 || vols != 0 {
		t.Errorf("after the last user's Cleanup: %d snapshot images, %d snapshot volumes left", imgs, vols)
	}

	// A snapshot the task keeps outlives its sample; a sample from it handed over (Detach)
	// outlives the task, and holds the images until it goes.
	kept, err := c.Snapshot(t.Context(), "kept", orchestrator.SnapshotOptions{KeepWithTask: true})
	if err != nil {
		t.Fatal(err)
	}
	if !kept.KeptByTask() {
		t.Error("KeepWithTask: the snapshot is not the task's")
	}
	if err := c.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if imgs, vols := snapshotArtifacts(t, o, name); imgs != 2 || vols != 2 {
		t.Errorf("a kept snapshot after its sample's Cleanup: %d images, %d volumes; want 2 and 2 (site, and the task's record)", imgs, vols)
	}
	d, err := task.SampleFrom(t.Context(), kept, orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Cleanup(context.Background()) })
	if got := sh(t, d.Default(), "cat /root/state"); got != "c-state\n" {
		t.Errorf("the sample from the kept snapshot: %q", got)
	}
	if err := d.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	imgs, vols := snapshotArtifacts(t, o, name)
	if imgs != 2 || vols != 0 {
		t.Errorf("after Task.Cleanup, with a handed-over sample from the kept snapshot alive: %d images, %d snapshot volumes; want its 2 images and no volume", imgs, vols)
	}
	if got := sh(t, d.Default(), "cat /root/state"); got != "c-state\n" {
		t.Errorf("the handed-over sample after Task.Cleanup: %q", got)
	}
	if err := d.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if imgs, vols := snapshotArtifacts(t, o, name); imgs != 0 || vols != 0 {
		t.Errorf("after the last user's Cleanup: %d snapshot images, %d snapshot volumes left", imgs, vols)
	}
}

// TestResetToASnapshotWhoseVolumeIsGoneLeaksNothing: the engine creates a volume a container
// mounts if it is missing, without labels; a copy from a snapshot's volume removed meanwhile
// must fail as not found, not bring the volume back where no cleanup finds it.
func TestResetToASnapshotWhoseVolumeIsGoneLeaksNothing(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueName("snapgone"), YAML: []byte(forkTask)})
	s := startSamples(t, task, 1)[0]
	if _, err := s.Snapshot(t.Context(), "base"); err != nil {
		t.Fatal(err)
	}
	gone := s.Project() + "_cbxstate.base.site"
	c := o.Client()
	if err := c.VolumeRemove(t.Context(), gone, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(t.Context(), "base"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("reset to a snapshot whose volume is gone: %v, want not found", err)
	}
	if _, err := c.VolumeInspect(t.Context(), gone); err == nil {
		_ = c.VolumeRemove(context.Background(), gone, true)
		t.Errorf("the reset made %s again", gone)
	}
}
