package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/prereqs"
)

// doctorJSON runs `composebox doctor --json <args>` and returns the exit code and the report.
func doctorJSON(t *testing.T, args ...string) (int, prereqs.Report) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"doctor", "--json"}, args...)...)
	var r prereqs.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json %v: exit %d, not a report (%v)\nstdout %s\nstderr %s", args, code, err, out, errOut)
	}
	// The exit status follows the report, whatever this machine's own checks say.
	if failed := code != exitOK; failed == r.OK {
		t.Errorf("doctor --json %v: exit %d with ok=%v", args, code, r.OK)
	}
	return code, r
}

// checkNamed is the report's check of that name, or fails the test.
func checkNamed(t *testing.T, r prereqs.Report, name string) prereqs.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %q check in %+v", name, r.Checks)
	return prereqs.Check{}
}

var suitesDir = filepath.Join("..", "..", "testdata", "projects", "suites")

// doctor PATH says whether the task loads and whether a warm pool can keep it, and why not.
func TestDoctorTaskPool(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		poolable bool
		reason   string
	}{
		{"metadata", []string{filepath.Join(suitesDir, "inspect-sample-metadata"), "--metadata", "docker_image=base"}, false,
			"warm pools: no, the task cannot be pooled: its files reference per-sample variables (SAMPLE_METADATA_DOCKER_IMAGE): each sample is loaded with its own values"},
		{"multi-service", []string{filepath.Join("..", "..", "testdata", "projects", "multi-service")}, true, "warm pools: yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := doctorJSON(t, tc.args...)
			if c := checkNamed(t, r, "task"); c.Status != prereqs.Pass {
				t.Errorf("task check %+v, want pass", c)
			}
			c := checkNamed(t, r, "pool")
			want := prereqs.Warn
			if tc.poolable {
				want = prereqs.Pass
			}
			if c.Status != want || c.Detail != tc.reason {
				t.Errorf("pool check %+v, want %s with %q", c, want, tc.reason)
			}
			// The text report carries the same line.
			_, out, _ := runCLI(t, append([]string{"doctor"}, tc.args...)...)
			if line := "[" + string(want) + "] pool: " + tc.reason; !strings.Contains(out, line+"\n") {
				t.Errorf("text report lacks %q:\n%s", line, out)
			}
		})
	}
}

// Without PATH there is no task check; a task that does not load fails doctor with every
// problem, and has no pool check; the task checks need no daemon.
func TestDoctorTaskFails(t *testing.T) {
	_, r := doctorJSON(t)
	for _, c := range r.Checks {
		if c.Name == "task" || c.Name == "pool" {
			t.Errorf("doctor without PATH reports %+v", c)
		}
	}
	code, r := doctorJSON(t, filepath.Join("..", "..", "testdata", "projects", "policy-violations"))
	c := checkNamed(t, r, "task")
	if code != exitFailure || c.Status != prereqs.Fail || !strings.HasPrefix(c.Detail, "policy_violation: ") ||
		!strings.Contains(c.Detail, "--allow privileged") || !strings.Contains(c.Detail, "--allow docker-socket") {
		t.Errorf("exit %d, task check %+v; want exit %d and a failed check listing every problem", code, c, exitFailure)
	}
	for _, c := range r.Checks {
		if c.Name == "pool" {
			t.Errorf("a task that does not load has a pool check: %+v", c)
		}
	}
	if code, _, errOut := runCLI(t, "doctor", "multi-service", "--metadata", "novalue"); code != exitUsage || !strings.Contains(errOut, "--metadata") {
		t.Errorf("doctor --metadata novalue: exit %d, stderr %q; want a usage error naming the flag", code, errOut)
	}

	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	_, r = doctorJSON(t, filepath.Join(suitesDir, "inspect-sample-metadata"), "--metadata", "docker_image=base")
	if c := checkNamed(t, r, "pool"); c.Status != prereqs.Warn || !strings.Contains(c.Detail, "SAMPLE_METADATA_DOCKER_IMAGE") {
		t.Errorf("without a daemon, pool check %+v", c)
	}
}
