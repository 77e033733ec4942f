package tracking_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
)

func TestDefaultStateDir(t *testing.T) {
	t.Setenv(tracking.StateDirEnv, "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if got := tracking.DefaultStateDir(); got != "/xdg/composebox" {
		t.Errorf("with XDG_DATA_HOME: %s", got)
	}
	t.Setenv(tracking.StateDirEnv, "/explicit")
	if got := tracking.DefaultStateDir(); got != "/explicit" {
		t.Errorf("with %s: %s", tracking.StateDirEnv, got)
	}
}

func TestCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	c := tracking.OpenCache(dir)
	if rs, err := c.Samples(); err != nil || len(rs) != 0 {
		t.Fatalf("empty cache: %v, %v", rs, err)
	}
	dead := startOwner(t)
	now := time.Now().UTC().Truncate(time.Second)
	live := tracking.SampleRecord{Project: "cbx-t-1", Task: "t", Sample: "1", Owner: labels.SelfOwner(), Config: "/x/compose.yaml", Created: now}
	gone := tracking.SampleRecord{Project: "cbx-t-2", Task: "t", Sample: "2", Owner: dead.label, Created: now}
	kept := tracking.SampleRecord{Project: "cbx-t-3", Task: "t", Sample: "3", Owner: dead.label, Created: now}
	handed := tracking.SampleRecord{Project: "cbx-t-4", Task: "t", Sample: "4", Owner: labels.OwnerDetached, Created: now}
	for _, r := range []tracking.SampleRecord{live, gone, kept, handed} {
		if err := c.PutSample(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PutTask(tracking.TaskRecord{Task: "t", Owner: labels.SelfOwner(), Created: now}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutTask(tracking.TaskRecord{Task: "weird/name with spaces", Owner: dead.label, Created: now}); err != nil {
		t.Fatal(err)
	}
	rs, err := c.Samples()
	if err != nil || len(rs) != 4 {
		t.Fatalf("samples %v, %v", rs, err)
	}
	for _, r := range rs {
		if r.Project == live.Project && r != live {
			t.Errorf("read back %+v, want %+v", r, live)
		}
	}
	dead.kill()
	// cbx-t-3 still exists in the engine; cbx-t-2 and cbx-t-4 do not.
	if err := c.Prune(func(p string) bool { return p == kept.Project }); err != nil {
		t.Fatal(err)
	}
	rs, _ = c.Samples()
	var left []string
	for _, r := range rs {
		left = append(left, r.Project)
	}
	if len(left) != 2 || !slices.Contains(left, live.Project) || !slices.Contains(left, kept.Project) {
		t.Errorf("after prune: %v, want the live and the existing one", left)
	}
	ts, _ := c.Tasks()
	if len(ts) != 1 || ts[0].Owner != labels.SelfOwner() {
		t.Errorf("tasks after prune: %+v, want only the live hold", ts)
	}
	if err := c.DeleteSample(live.Project); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSample(live.Project); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if err := c.DeleteTask("t", labels.SelfOwner()); err != nil {
		t.Fatal(err)
	}
	// The cache is only a cache: deleting it under a reader is fine.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if rs, err := c.Samples(); err != nil || len(rs) != 0 {
		t.Errorf("deleted cache: %v, %v", rs, err)
	}
}
