package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
)

// TestForkThreeWays copies a live sample three ways from the command line: each copy has the
// source's files, and its service names resolve in its own networks.
func TestForkThreeWays(t *testing.T) {
	testutil.Docker(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	up := upJSON(t, "--task", "cli-fork", filepath.Join("..", "..", "testdata", "projects", "multi-service"))
	if code, _, errOut := runCLI(t, "exec", "-p", up.Project, "--", "sh", "-c", "echo branch-point > /tmp/mark"); code != 0 {
		t.Fatalf("exec: %d %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "fork", "--json", "-p", up.Project, "-n", "3")
	var res forkJSON
	_ = json.Unmarshal([]byte(out), &res)
	for _, f := range res.Forks {
		t.Cleanup(func() { runCLI(t, "down", f.Project) })
	}
	if code != 0 || len(res.Forks) != 3 || res.Source != up.Project {
		t.Fatalf("fork: exit %d, %+v, stderr %s", code, res, errOut)
	}
	for _, f := range res.Forks {
		if f.Project == up.Project || len(f.Services) != 3 || f.Engine == "" {
			t.Errorf("fork %+v", f)
		}
		code, out, errOut := runCLI(t, "exec", "-p", f.Project, "--", "sh", "-c", "cat /tmp/mark; wget -qO- http://web/")
		if code != 0 || !strings.Contains(out, "branch-point") || !strings.Contains(out, "hello from web") {
			t.Errorf("fork %s: exit %d, %q, %s", f.Project, code, out, errOut)
		}
	}
	// Without --json: one project per line.
	code, out, errOut = runCLI(t, "fork", "-p", up.Project)
	lines := strings.Fields(out)
	for _, p := range lines {
		t.Cleanup(func() { runCLI(t, "down", p) })
	}
	if code != 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "cbx-cli-fork-") {
		t.Errorf("fork: exit %d, %q, %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "fork", "-p", "cbx-no-such-project"); code == 0 || !strings.Contains(errOut, "not_found") {
		t.Errorf("fork of a missing project: exit %d, %s", code, errOut)
	}
}

// TestSnapshotResetCLI snapshots a sample `up` started and resets it, each from a process of
// its own.
func TestSnapshotResetCLI(t *testing.T) {
	testutil.Docker(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	up := upJSON(t, "--task", "cli-reset", filepath.Join("..", "..", "testdata", "projects", "multi-service"))
	p := up.Project
	write := func(v string) {
		if code, _, errOut := runCLI(t, "exec", "-p", p, "--", "sh", "-c", "echo "+v+" > /tmp/state"); code != 0 {
			t.Fatalf("exec: %d %s", code, errOut)
		}
	}
	write("one")
	if code, out, errOut := runCLI(t, "snapshot", "-p", p, "s1"); code != 0 || !strings.Contains(out, "snapshot s1") {
		t.Fatalf("snapshot: %d %q %s", code, out, errOut)
	}
	write("two")
	if code, out, errOut := runCLI(t, "reset", "-p", p, "s1"); code != 0 || !strings.Contains(out, "reset "+p) {
		t.Fatalf("reset: %d %q %s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "exec", "-p", p, "--", "sh", "-c", "cat /tmp/state; wget -qO- http://web/")
	if code != 0 || !strings.HasPrefix(out, "one\n") || !strings.Contains(out, "hello from web") {
		t.Errorf("after reset: %d %q %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "reset", "-p", p, "nope"); code == 0 || !strings.Contains(errOut, "not_found") {
		t.Errorf("reset to a missing snapshot: %d %s", code, errOut)
	}
	// The sample is still handed over: down removes it with its snapshot (upJSON's cleanup).
	code, out, _ = runCLI(t, "ls", "--json")
	if code != 0 || !strings.Contains(out, p) || !strings.Contains(out, `"detached"`) {
		t.Errorf("ls after reset: %d %s", code, out)
	}
}
