package orchestrator_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

const keepAlive = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

func uniqueTask(name string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "cbxt-" + name + "-" + hex.EncodeToString(b[:])
}

// removeTaskProjects removes, at the end of the test, every project of task whoever owns it.
func removeTaskProjects(t *testing.T, c client.APIClient, task string) {
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := tracking.Sweep(ctx, c, backend.Selector{All: true, Task: task}, cleanup.RemoveOptions{}); err != nil {
			t.Errorf("remove projects of %s: %v", task, err)
		}
	})
}

// deadOwner is the owner label of a process that has exited.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := labels.ProcessStartTime(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%d", host, cmd.Process.Pid, start)
}

// leftoverNetwork creates a project that is only a network, as a crashed run can leave.
func leftoverNetwork(t *testing.T, c client.APIClient, task, owner string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	project := "cbx-" + task + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { _, _ = cleanup.RemoveProject(context.Background(), c, project, cleanup.RemoveOptions{}) })
	_, err := c.NetworkCreate(t.Context(), project+"_default", network.CreateOptions{Labels: map[string]string{
		labels.ComposeProjectLabel: project, labels.LabelManaged: "true", labels.LabelTask: task,
		labels.LabelSample: "x", labels.LabelOwner: owner, labels.LabelCreated: time.Now().UTC().Format(time.RFC3339),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return project
}

func status(t *testing.T, c client.APIClient, project string) backend.OwnerStatus {
	t.Helper()
	all, err := tracking.List(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Name == project {
			return p.Status
		}
	}
	return "gone"
}

func TestSweepStaleAtTaskInit(t *testing.T) {
	o, _ := newOrchestrator(t, orchestrator.WithSweepStale())
	c := dockerClient(t, o)
	task, other := uniqueTask("sweep"), uniqueTask("sweep-other")
	removeTaskProjects(t, c, task)
	removeTaskProjects(t, c, other)
	dead := deadOwner(t)
	stale := leftoverNetwork(t, c, task, dead)
	live := leftoverNetwork(t, c, task, labels.SelfOwner())
	handed := leftoverNetwork(t, c, task, dead)
	if err := tracking.MarkDetached(t.Context(), c, handed, task, "x"); err != nil {
		t.Fatal(err)
	}
	otherStale := leftoverNetwork(t, c, other, dead)

	taskInit(t, o, orchestrator.TaskSpec{Name: task, YAML: []byte(keepAlive)})
	for project, want := range map[string]backend.OwnerStatus{
		stale: "gone", live: backend.StatusAlive, handed: backend.StatusDetached, otherStale: backend.StatusStale,
	} {
		if got := status(t, c, project); got != want {
			t.Errorf("%s after TaskInit's sweep: %s, want %s", project, got, want)
		}
	}
}

func TestDetachedSampleOutlivesTaskCleanup(t *testing.T) {
	o, rec := newOrchestrator(t)
	c := dockerClient(t, o)
	name := uniqueTask("detach")
	removeTaskProjects(t, c, name)
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	kept, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kept.Cleanup(context.Background()) })

	if err := s.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Detach(t.Context()); err != nil {
		t.Errorf("second Detach: %v", err)
	}
	if got := status(t, c, s.Project()); got != backend.StatusDetached {
		t.Errorf("detached sample is %s", got)
	}
	if rec.count(orchestrator.EventSampleDetached) != 2 {
		t.Errorf("events: %+v", rec.events)
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := status(t, c, kept.Project()); got != "gone" {
		t.Errorf("Task.Cleanup left its own sample %s: %s", kept.Project(), got)
	}
	if got := status(t, c, s.Project()); got != backend.StatusDetached {
		t.Fatalf("Task.Cleanup removed the detached sample: %s", got)
	}
	// An explicit removal does remove it, marker included.
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.Resources(t, c, projectLabel(s.Project())); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestStateCacheFollowsSamples(t *testing.T) {
	dir := t.TempDir()
	o, _ := newOrchestrator(t, orchestrator.WithStateDir(dir))
	name := uniqueTask("state")
	removeTaskProjects(t, dockerClient(t, o), name)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: "sample-7"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	cache := tracking.OpenCache(dir)
	recs, err := cache.Samples()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	r := recs[0]
	if r.Project != s.Project() || r.Task != name || r.Sample != "sample-7" || r.Owner != labels.SelfOwner() || r.Config == "" || time.Since(r.Created) > time.Minute {
		t.Errorf("record %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "samples", s.Project()+".json")); err != nil {
		t.Error(err)
	}
	holds, err := cache.Tasks()
	if err != nil || len(holds) != 1 || holds[0].Task != name || holds[0].Owner != labels.SelfOwner() {
		t.Errorf("task holds %+v, %v", holds, err)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if recs, _ := cache.Samples(); len(recs) != 0 {
		t.Errorf("records after cleanup: %+v", recs)
	}
}
