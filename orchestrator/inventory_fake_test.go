package orchestrator_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// detachedSample starts a sample of task and hands it over, so that only an explicit removal
// takes it away; the test's end removes it if the test did not.
func detachedSample(t *testing.T, o *orchestrator.Orchestrator, task string) string {
	t.Helper()
	tk := fakeTask(t, o, orchestrator.TaskSpec{Name: task})
	s, err := tk.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = o.Remove(t.Context(), []string{s.Project()}, orchestrator.RemoveOptions{}) })
	return s.Project()
}

func TestFakeListAndRemove(t *testing.T) {
	state := t.TempDir()
	f, o, _ := newFake(t, orchestrator.WithStateDir(state))
	a := detachedSample(t, o, "list-a")
	b := detachedSample(t, o, "list-b")

	got, err := o.List(t.Context(), orchestrator.ListOptions{Task: "list-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Projects) != 1 || got.Projects[0].Name != a || got.Projects[0].Status != backend.StatusDetached ||
		got.Projects[0].Containers != 2 || got.Projects[0].Running != 2 || got.Projects[0].Task != "list-a" {
		t.Fatalf("list of task list-a: %+v", got)
	}

	// A sample's directory under the state dir goes with its project.
	dir := orchestrator.SampleDir(state, a)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := o.Remove(t.Context(), []string{"no-such-project", a}, orchestrator.RemoveOptions{})
	if !errors.Is(err, orchestrator.ErrNotFound) {
		t.Fatalf("remove of an unknown name: %v, want not found", err)
	}
	if len(res) != 1 || res[0].Project != a || res[0].Err != nil || res[0].Removed.Containers != 2 {
		t.Fatalf("remove results: %+v", res)
	}
	if got := f.Projects(); !slices.Equal(got, []string{b}) {
		t.Fatalf("projects after remove: %v, want only %s", got, b)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sample dir after remove: %v", err)
	}
}

func TestFakePruneStaleDryRunThenRemove(t *testing.T) {
	f, o, _ := newFake(t)
	keep := detachedSample(t, o, "prune-keep")
	tk := fakeTask(t, o, orchestrator.TaskSpec{Name: "prune-stale"})
	s, err := tk.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	// This process stands for a dead owner: its own samples are stale, a detached one never is.
	f.MarkOwnerDead(labels.SelfOwner())

	dry, err := o.Prune(t.Context(), orchestrator.PruneOptions{Stale: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || len(dry.Projects) != 1 || dry.Projects[0].Name != s.Project() || dry.Projects[0].Removed != nil {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := f.Projects(); len(got) != 2 {
		t.Fatalf("a dry run removed something: %v", got)
	}

	var seen []string
	rep, err := o.Prune(t.Context(), orchestrator.PruneOptions{Stale: true, Task: "prune-stale",
		OnProject: func(p orchestrator.Project, status string) { seen = append(seen, p.Name+" "+status) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Projects) != 1 || rep.Projects[0].Removed == nil || rep.Projects[0].Removed.Containers != 2 || rep.Projects[0].Err != nil {
		t.Fatalf("prune: %+v", rep)
	}
	if want := []string{s.Project() + " removing", s.Project() + " removed"}; !slices.Equal(seen, want) {
		t.Fatalf("progress: %v, want %v", seen, want)
	}
	if got := f.Projects(); !slices.Equal(got, []string{keep}) {
		t.Fatalf("projects after prune: %v, want only the detached %s", got, keep)
	}
}

// A selection that names projects and filters too is refused before anything is removed,
// though the fake backend's Sweep would take the names alone.
func TestFakePruneRefusesNamesWithFilters(t *testing.T) {
	f, o, _ := newFake(t)
	a := detachedSample(t, o, "prune-mixed")
	_, err := o.Prune(t.Context(), orchestrator.PruneOptions{Names: []string{a}, All: true})
	if !errors.Is(err, orchestrator.ErrInvalidConfig) {
		t.Fatalf("prune of names with --all: %v, want invalid config", err)
	}
	if got := f.Projects(); !slices.Equal(got, []string{a}) {
		t.Fatalf("projects after a refused prune: %v, want %s still there", got, a)
	}
}

func TestFakePruneImagesKeepsLiveTasks(t *testing.T) {
	f, o, _ := newFake(t)
	detachedSample(t, o, "img-live")
	managed := func(task string) map[string]string {
		return map[string]string{labels.LabelManaged: "true", labels.LabelTask: task}
	}
	f.AddImage("img-live:1", managed("img-live"))
	f.AddImage("img-gone:1", managed("img-gone"))

	if _, err := o.Prune(t.Context(), orchestrator.PruneOptions{Images: true, Task: "img-gnoe"}); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Fatalf("prune of a misspelt task: %v, want not found", err)
	}
	rep, err := o.Prune(t.Context(), orchestrator.PruneOptions{Images: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Images == nil || len(rep.Images.Removed) != 1 || rep.Images.Removed[0].Task != "img-gone" ||
		len(rep.Images.Kept) != 1 || rep.Images.Kept[0].Task != "img-live" || len(rep.Projects) != 0 {
		t.Fatalf("image report: %+v", rep.Images)
	}
	if _, err := f.Image(t.Context(), "img-gone:1"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Fatalf("pruned image still there: %v", err)
	}
	if _, err := f.Image(t.Context(), "img-live:1"); err != nil {
		t.Fatalf("live task's image: %v", err)
	}
}

func TestFakeDoctorReportsLocalChecksWithoutEngine(t *testing.T) {
	f, o, _ := newFake(t)
	f.SetDown(true)
	local := backend.Check{Name: "task", Status: backend.Fail, Detail: "does not load"}
	r, err := o.Doctor(t.Context(), orchestrator.DoctorOptions{Build: true, Local: []backend.Check{local}})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || len(r.Checks) != 2 || r.Checks[0].Status != backend.Fail || r.Checks[1] != local {
		t.Fatalf("report: %+v", r)
	}
}
