package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The pool tests need a process that keeps a warm pool and can be killed: this test binary,
// re-run as TestHelperPoolOwner. It keeps a pool of 2 samples of the task in the directory it
// is given, prints its owner once both are ready, and blocks until its stdin closes.
const (
	poolHelperDirEnv  = "CBX_TEST_POOL_DIR"
	poolHelperTaskEnv = "CBX_TEST_POOL_TASK"
)

func TestHelperPoolOwner(t *testing.T) {
	dir := os.Getenv(poolHelperDirEnv)
	if dir == "" {
		t.Skip("helper process of the warm pool tests")
	}
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	o, err := orchestrator.New(orchestrator.WithStateDir(filepath.Join(dir, "state")))
	if err != nil {
		fail(err)
	}
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: os.Getenv(poolHelperTaskEnv), Path: filepath.Join(dir, "task"), Warm: 2, SharePool: true})
	if err != nil {
		fail(err)
	}
	for st := task.PoolStatus(); st.Ready < 2; st = task.PoolStatus() {
		if st.Failures > 3 {
			fail(fmt.Errorf("pool refills fail: %+v", st))
		}
		time.Sleep(20 * time.Millisecond) // a helper process, not a test: it just waits to report
	}
	fmt.Printf("CBX-OWNER %s\n", labels.SelfOwner())
	_, _ = bufio.NewReader(os.Stdin).ReadString(0)
	_ = task.Cleanup(ctx)
	os.Exit(0)
}

// startPoolOwner runs TestHelperPoolOwner for task in dir and waits until its pool is full. It
// is killed at the end of the test.
func startPoolOwner(t *testing.T, dir, task string) (owner string, kill func()) {
	t.Helper()
	h, owner := testutil.StartHelper(t, "TestHelperPoolOwner", []string{poolHelperDirEnv + "=" + dir, poolHelperTaskEnv + "=" + task},
		"CBX-OWNER ", 2*time.Minute)
	return owner, h.Kill
}

// poolTaskDir writes a one-service task directory, so that the helper and `up` load the same
// configuration.
func poolTaskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "task"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "task", "compose.yaml"), []byte(keepAlive), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func warmOf(got map[string]lsEntry, owner string) []string {
	var out []string
	for _, p := range got {
		if p.Pool == labels.PoolWarm && p.Owner == owner {
			out = append(out, p.Name)
		}
	}
	return out
}

func TestKilledPoolOwnersWarmSamplesAreStaleAndCleanedUp(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	task := uniqueTask("pool")
	removeTaskProjects(t, c, task)
	owner, kill := startPoolOwner(t, poolTaskDir(t), task)
	got := lsJSON(t, task)
	warm := warmOf(got, owner)
	if len(warm) != 2 {
		t.Fatalf("ls of a full pool of 2: %+v", got)
	}
	for _, name := range warm {
		if got[name].Status != backend.StatusAlive {
			t.Fatalf("warm %s is %s, want alive", name, got[name].Status)
		}
	}
	code, out, _ := runCLI(t, "ls")
	if code != 0 || !strings.Contains(out, warm[0]) || !strings.Contains(lineOf(out, warm[0]), " warm ") {
		t.Fatalf("ls does not show %s as warm:\n%s", warm[0], out)
	}
	kill()
	got = lsJSON(t, task)
	for _, name := range warm {
		if p := got[name]; !p.Stale || p.Pool != labels.PoolWarm {
			t.Fatalf("after kill -9, %s: %+v, want a stale warm sample", name, p)
		}
	}
	res := cleanupJSON(t, "--stale", "--task", task)
	if names := removedNames(res); len(names) != 2 {
		t.Fatalf("cleanup --stale removed %v, want the 2 warm samples %v", names, warm)
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Fatalf("%d labelled resources left after cleanup --stale", n)
	}
}

func TestUpTakesFromAnotherProcesssPool(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	task := uniqueTask("shared")
	removeTaskProjects(t, c, task)
	dir := poolTaskDir(t)
	owner, _ := startPoolOwner(t, dir, task)
	warm := warmOf(lsJSON(t, task), owner)
	if len(warm) != 2 {
		t.Fatalf("%d warm samples of the other process, want 2", len(warm))
	}

	code, out, errOut := runCLI(t, "--json", "up", "--task", task, filepath.Join(dir, "task"))
	if code != 0 {
		t.Fatalf("up: exit %d\n%s%s", code, out, errOut)
	}
	var res upResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("up --json: %v\n%s", err, out)
	}
	if !strings.Contains(strings.Join(warm, " "), res.Project) {
		t.Fatalf("up started %s, not one of the other process's warm samples %v", res.Project, warm)
	}
	p := lsJSON(t, task)[res.Project]
	if p.Status != backend.StatusDetached || p.Pool != labels.PoolClaimed {
		t.Fatalf("the taken sample: %+v, want detached and claimed", p)
	}
	// `up --cold` starts its own.
	code, out, errOut = runCLI(t, "up", "--cold", "--task", task, filepath.Join(dir, "task"))
	if code != 0 || strings.Contains(strings.Join(warm, " "), strings.TrimSpace(out)) {
		t.Fatalf("up --cold: exit %d, project %q (warm: %v)\n%s", code, out, warm, errOut)
	}
}

// lineOf is the line of out that mentions s.
func lineOf(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
