package cleanup_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup"
)

func TestDefaultStateDir(t *testing.T) {
	t.Setenv(cleanup.StateDirEnv, "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if got := cleanup.DefaultStateDir(); got != "/xdg/composebox" {
		t.Errorf("with XDG_DATA_HOME: %s", got)
	}
	t.Setenv(cleanup.StateDirEnv, "/explicit")
	if got := cleanup.DefaultStateDir(); got != "/explicit" {
		t.Errorf("with %s: %s", cleanup.StateDirEnv, got)
	}
}

func TestCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	c := cleanup.OpenCache(dir)
	if rs, err := c.Samples(); err != nil || len(rs) != 0 {
		t.Fatalf("empty cache: %v, %v", rs, err)
	}
	dead := startOwner(t)
	now := time.Now().UTC().Truncate(time.Second)
	live := cleanup.SampleRecord{Project: "cbx-t-1", Task: "t", Sample: "1", Owner: cleanup.SelfOwner(), Config: "/x/compose.yaml", Created: now}
	gone := cleanup.SampleRecord{Project: "cbx-t-2", Task: "t", Sample: "2", Owner: dead.label, Created: now}
	kept := cleanup.SampleRecord{Project: "cbx-t-3", Task: "t", Sample: "3", Owner: dead.label, Created: now}
	handed := cleanup.SampleRecord{Project: "cbx-t-4", Task: "t", Sample: "4", Owner: cleanup.OwnerDetached, Created: now}
	for _, r := range []cleanup.SampleRecord{live, gone, kept, handed} {
		if err := c.PutSample(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PutTask(cleanup.TaskRecord{Task: "t", Owner: cleanup.SelfOwner(), Created: now}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutTask(cleanup.TaskRecord{Task: "weird/name with spaces", Owner: dead.label, Created: now}); err != nil {
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
	if len(ts) != 1 || ts[0].Owner != cleanup.SelfOwner() {
		t.Errorf("tasks after prune: %+v, want only the live hold", ts)
	}
	if err := c.DeleteSample(live.Project); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSample(live.Project); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if err := c.DeleteTask("t", cleanup.SelfOwner()); err != nil {
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
