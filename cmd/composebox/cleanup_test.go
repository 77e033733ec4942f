package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The "done when": a sample whose owner is killed with SIGKILL shows as stale in `ls`,
// and `cleanup --stale` removes it, leaving nothing labelled; 20 times in a row.
func TestKilledOwnersSampleIsStaleAndCleanedUp(t *testing.T) {
	c := testutil.Docker(t)
	task := uniqueTask("kill9")
	removeTaskProjects(t, c, task)
	for i := range 20 {
		owner := startOwner(t, "own", task)
		got := lsJSON(t, task)
		// The listing comes from package tracking, which cannot know the engine: the backend
		// names it.
		if p, ok := got[owner.project]; !ok || p.Status != backend.StatusAlive || p.Stale || p.Owner != owner.owner || p.Engine != backend.DefaultEngine {
			t.Fatalf("run %d: ls before the kill: %+v, want %s alive on engine %s, owned by %s", i, got, owner.project, backend.DefaultEngine, owner.owner)
		}
		owner.kill()
		got = lsJSON(t, task)
		if p, ok := got[owner.project]; !ok || p.Status != backend.StatusStale || !p.Stale || p.Containers != 1 {
			t.Fatalf("run %d: ls after kill -9: %+v, want %s stale with its container", i, got, owner.project)
		}
		res := cleanupJSON(t, "--stale", "--task", task)
		if names := removedNames(res); !slices.Equal(names, []string{owner.project}) || res.Projects[0].Removed == nil || res.Projects[0].Removed.Containers != 1 ||
			res.Projects[0].Engine != backend.DefaultEngine {
			t.Fatalf("run %d: cleanup --stale removed %v (%+v), want %s", i, names, res.Projects, owner.project)
		}
		if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
			t.Fatalf("run %d: %d labelled resources left after cleanup --stale", i, n)
		}
	}
}

// The same with the reaper: nothing remains within 10 s of the kill, without any command, and
// the watchdog exits.
func TestReaperCleansUpAfterKilledOwner(t *testing.T) {
	c := testutil.Docker(t)
	task := uniqueTask("reaper")
	removeTaskProjects(t, c, task)
	var worst time.Duration
	for i := range 20 {
		owner := startOwner(t, "own+reaper", task)
		if !reaperRunning(owner.owner) {
			t.Fatalf("run %d: no watchdog for %s", i, owner.owner)
		}
		killed := time.Now()
		owner.kill()
		if !poll(10*time.Second, func() bool { return testutil.Resources(t, c, taskLabel(task)) == 0 }) {
			t.Fatalf("run %d: %d resources of %s left 10 s after kill -9", i, testutil.Resources(t, c, taskLabel(task)), owner.project)
		}
		worst = max(worst, time.Since(killed))
		if !poll(10*time.Second, func() bool { return !reaperRunning(owner.owner) }) {
			t.Fatalf("run %d: the watchdog of %s is still running", i, owner.owner)
		}
	}
	t.Logf("slowest reap: %s after kill -9", worst.Round(time.Millisecond))
}

// A live owner's project is never removed, by `cleanup --stale` or by another owner's reaper.
func TestLiveOwnersProjectsAreNeverRemoved(t *testing.T) {
	c := testutil.Docker(t)
	task := uniqueTask("live")
	removeTaskProjects(t, c, task)
	a := startOwner(t, "own+reaper", task)
	b := startOwner(t, "own+reaper", task)
	if res := cleanupJSON(t, "--stale", "--task", task); len(res.Projects) != 0 {
		t.Fatalf("cleanup --stale removed live projects: %v", removedNames(res))
	}
	a.kill()
	if !poll(10*time.Second, func() bool { return testutil.Resources(t, c, projectLabel(a.project)) == 0 }) {
		t.Fatalf("%s not reaped", a.project)
	}
	if !poll(10*time.Second, func() bool { return !reaperRunning(a.owner) }) {
		t.Fatal("a's watchdog still running")
	}
	got := lsJSON(t, task)
	if p, ok := got[b.project]; !ok || p.Status != backend.StatusAlive || p.Containers != 1 {
		t.Fatalf("b's project after a's death: %+v", got)
	}
	if res := cleanupJSON(t, "--stale", "--task", task); len(res.Projects) != 0 {
		t.Fatalf("cleanup --stale removed a live project: %v", removedNames(res))
	}
	if !reaperRunning(b.owner) {
		t.Error("b's watchdog went away while b lives")
	}
	// b ends normally: it cleans up after itself, and its watchdog has nothing to do.
	_ = b.stdin.Close()
	b.wait(t)
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources left", n)
	}
	if !poll(10*time.Second, func() bool { return !reaperRunning(b.owner) }) {
		t.Error("b's watchdog still running after b exited")
	}
}

// A sample handed over as detached (what `up` does once it is ready) survives its owner's
// exit, its owner's reaper and `cleanup --stale`; `cleanup --all` removes it.
func TestDetachedSampleSurvivesStaleCleanupAndReaper(t *testing.T) {
	c := testutil.Docker(t)
	task := uniqueTask("detached")
	removeTaskProjects(t, c, task)
	up := startOwner(t, "detach+reaper", task)
	up.wait(t)
	if !poll(10*time.Second, func() bool { return !reaperRunning(up.owner) }) {
		t.Fatal("the watchdog did not exit after its owner")
	}
	got := lsJSON(t, task)
	if p, ok := got[up.project]; !ok || p.Status != backend.StatusDetached || p.Stale || p.Owner != labels.OwnerDetached || p.Containers != 1 {
		t.Fatalf("ls: %+v, want %s detached", got, up.project)
	}
	// Scoped to the task: a global sweep would also meet other runs' stale projects on a shared
	// engine, and their trouble is not this test's.
	if res := cleanupJSON(t, "--stale", "--task", task); slices.Contains(removedNames(res), up.project) {
		t.Fatal("cleanup --stale removed a detached sample")
	}
	if res := cleanupJSON(t, "--all", "--task", task); !slices.Equal(removedNames(res), []string{up.project}) {
		t.Fatalf("cleanup --all --task removed %v", removedNames(res))
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

// The issue's own wording of the scenario: `composebox run ... -- sleep 60`, killed.
func TestKilledRunBinaryIsStale(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	task := uniqueTask("run")
	removeTaskProjects(t, c, task)
	bin := filepath.Join(t.TempDir(), "composebox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, "run", "--task", task, "--", "sleep", "60")
	run.Dir = t.TempDir()
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Process.Kill(); _ = run.Wait() })
	var project string
	if !poll(30*time.Second, func() bool {
		for name, p := range lsJSON(t, task) {
			if p.Status == backend.StatusAlive && p.Containers == 1 {
				project = name
				return true
			}
		}
		return false
	}) {
		t.Fatal("composebox run's sample never showed up alive")
	}
	_ = run.Process.Kill() // SIGKILL

	_ = run.Wait()
	if p := lsJSON(t, task)[project]; !p.Stale {
		t.Fatalf("after kill -9: %+v, want stale", p)
	}
	if res := cleanupJSON(t, "--stale", "--task", task); !slices.Equal(removedNames(res), []string{project}) {
		t.Fatalf("cleanup --stale removed %v", removedNames(res))
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestCleanupRemovesNetworkLeftByHandDeletedContainers(t *testing.T) {
	o := newLib(t)
	c := engineClient(t, o)
	task := uniqueTask("net")
	s := samples(t, o, task, twoServices, 1)[0]
	ctrs, err := c.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", projectLabel(s.Project())))})
	if err != nil || len(ctrs) != 2 {
		t.Fatalf("containers %v, %v", ctrs, err)
	}
	for _, x := range ctrs {
		if err := c.ContainerRemove(t.Context(), x.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok := lsJSON(t, task)[s.Project()]; !ok || p.Containers != 0 || p.Networks != 1 {
		t.Fatalf("ls with only the network left: %+v (listed %t)", p, ok)
	}
	res := cleanupJSON(t, s.Project())
	if len(res.Projects) != 1 || res.Projects[0].Removed.Networks != 1 {
		t.Fatalf("cleanup: %+v", res.Projects)
	}
	if n := testutil.Resources(t, c, projectLabel(s.Project())); n != 0 {
		t.Errorf("%d resources left", n)
	}
	if _, ok := lsJSON(t, task)[s.Project()]; ok {
		t.Error("ls still lists the removed project")
	}
}

func TestCleanupByContainerNameDryRunAndTwice(t *testing.T) {
	o := newLib(t)
	c := engineClient(t, o)
	task := uniqueTask("names")
	ss := samples(t, o, task, twoServices, 2)
	a, b := ss[0], ss[1]
	ctr := a.Default().ContainerName()

	// --dry-run prints the plan and removes nothing.
	res := cleanupJSON(t, "--dry-run", ctr)
	if !res.DryRun || !slices.Equal(removedNames(res), []string{a.Project()}) || res.Projects[0].Removed != nil {
		t.Fatalf("dry run: %+v", res)
	}
	code, out, _ := runCLI(t, "cleanup", "--dry-run", "--all", "--task", task)
	if code != 0 || !strings.Contains(out, "would remove "+a.Project()) || !strings.Contains(out, "would remove "+b.Project()) {
		t.Errorf("dry run, human: exit %d\n%s", code, out)
	}
	if n := testutil.Resources(t, c, projectLabel(a.Project())); n != 3 {
		t.Fatalf("--dry-run removed something: %d of 3 resources left", n)
	}

	// A container name selects its project, and only that one.
	res = cleanupJSON(t, ctr)
	if !slices.Equal(removedNames(res), []string{a.Project()}) || *res.Projects[0].Removed != (cleanup.Removed{Containers: 2, Networks: 1}) {
		t.Fatalf("cleanup %s: %+v", ctr, res.Projects)
	}
	if n := testutil.Resources(t, c, projectLabel(a.Project())); n != 0 {
		t.Errorf("%d resources of %s left", n, a.Project())
	}
	if n := testutil.Resources(t, c, projectLabel(b.Project())); n != 3 {
		t.Errorf("the other project lost resources: %d of 3 left", n)
	}

	// Twice is a no-op, by container or project name.
	code, out, errOut := runCLI(t, "cleanup", ctr)
	if code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Errorf("second cleanup of %s: exit %d\n%s%s", ctr, code, out, errOut)
	}
	if res := cleanupJSON(t, b.Project()); len(res.Projects) != 1 {
		t.Fatalf("cleanup %s: %+v", b.Project(), res)
	}
	if res := cleanupJSON(t, b.Project()); len(res.Projects) != 0 {
		t.Errorf("second cleanup %s: %+v", b.Project(), res)
	}
}

// Cleanup of 20 two-service projects at once, with the time it took in the log.
func TestCleanupAllOfTwentyTwoServiceProjects(t *testing.T) {
	o := newLib(t, orchestrator.WithMaxConcurrentSamples(8))
	c := engineClient(t, o)
	task := uniqueTask("twenty")
	ss := samples(t, o, task, twoServices, 20)
	start := time.Now()
	res := cleanupJSON(t, "--all", "--task", task)
	took := time.Since(start)
	t.Logf("cleanup --all of 20 two-service projects: %s", took.Round(time.Millisecond))
	if len(res.Projects) != 20 {
		t.Fatalf("removed %d projects, want 20", len(res.Projects))
	}
	for _, p := range res.Projects {
		if p.Error != "" || p.Removed.Containers != 2 || p.Removed.Networks != 1 {
			t.Errorf("%s: %+v %s", p.Name, p.Removed, p.Error)
		}
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources left", n)
	}
	// Nothing of the task is left: naming it again is a not_found, as a misspelt name is.
	if code, _, errOut := runCLI(t, "cleanup", "--all", "--task", task); code != exitFailure || !strings.Contains(errOut, "not_found") {
		t.Errorf("second cleanup: exit %d, %s", code, errOut)
	}
	for _, s := range ss {
		if err := s.Cleanup(t.Context()); err != nil {
			t.Errorf("sample cleanup after cleanup --all: %v", err)
		}
	}
}

// Labels are the truth: with the state directory deleted, ls, down and cleanup still work.
func TestVerbsWorkWithTheStateFileDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	o := newLib(t, orchestrator.WithStateDir(dir))
	task := uniqueTask("nostate")
	ss := samples(t, o, task, twoServices, 2)
	if recs, err := tracking.OpenCache(dir).Samples(); err != nil || len(recs) != 2 {
		t.Fatalf("state cache before the deletion: %v, %v", recs, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	got := lsJSON(t, task, "--state-dir", dir)
	if len(got) != 2 {
		t.Fatalf("ls without a state file: %+v", got)
	}
	if code, out, errOut := runCLI(t, "down", ss[0].Project()); code != 0 {
		t.Fatalf("down: exit %d\n%s%s", code, out, errOut)
	}
	if res := cleanupJSON(t, "--state-dir", dir, ss[1].Project()); len(res.Projects) != 1 {
		t.Fatalf("cleanup: %+v", res)
	}
	if n := testutil.Resources(t, engineClient(t, o), taskLabel(task)); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestCleanupWithoutSelectorPrintsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"cleanup"},
		{"cleanup", "--dry-run"},
		{"cleanup", "--task", "x"},
		{"cleanup", "--older-than", "1h"},
		{"cleanup", "some-project", "--all"},
		{"cleanup", "--images", "--older-than", "1h"},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "Usage:") || !strings.Contains(errOut, "composebox: usage: cleanup: ") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the usage", args, code, out, errOut)
		}
	}
}

// Image hygiene: a task's built image is kept while the task is live, and removed, with the
// bytes reported, once it has no live project and no live holder.
func TestCleanupImages(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("ARG COMPOSEBOX_BASE_IMAGE\nFROM ${COMPOSEBOX_BASE_IMAGE}\nCOPY blob /blob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 200_000)
	copy(blob, fmt.Sprint(time.Now().UnixNano())) // a new content hash, so a new image
	if err := os.WriteFile(filepath.Join(dir, "blob"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	o := newLib(t, orchestrator.WithStateDir(state))
	c := engineClient(t, o)
	name := uniqueTask("img")
	removeTaskProjects(t, c, name)
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range task.Images() {
		testutil.RemoveImage(t, c, ref)
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })

	res := cleanupJSON(t, "--images", "--task", name, "--state-dir", state)
	if res.Images == nil || len(res.Images.Removed) != 0 || len(res.Images.Kept) != 1 {
		t.Fatalf("with a live sample: %+v", res.Images)
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The task is still held by this process until Task.Cleanup forgets it (the endTracking
	// hook); forget it here in case that hook is not wired in.
	_ = tracking.OpenCache(state).DeleteTask(name, labels.SelfOwner())

	res = cleanupJSON(t, "--images", "--task", name, "--state-dir", state, "--dry-run")
	if len(res.Images.Removed) != 1 || res.Images.BytesReclaimed < int64(len(blob)) {
		t.Fatalf("dry run: %+v", res.Images)
	}
	code, out, _ := runCLI(t, "cleanup", "--images", "--task", name, "--state-dir", state)
	if code != 0 || !strings.Contains(out, "removed image cbx-") || !strings.Contains(out, "reclaimed ") {
		t.Fatalf("cleanup --images: exit %d\n%s", code, out)
	}
	t.Logf("%s", strings.TrimSpace(out))
	for _, ref := range task.Images() {
		if _, err := c.ImageInspect(t.Context(), ref); err == nil {
			t.Errorf("image %s still present", ref)
		}
	}
	if _, err := c.ImageInspect(t.Context(), testutil.BaseImage(t)); err != nil {
		t.Errorf("the base image went too: %v", err)
	}
}
