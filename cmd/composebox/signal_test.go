package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/internal/testutil"
)

// buildCLI builds the composebox binary into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "composebox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// neverHealthy is a service that runs but never passes its healthcheck: `up` waits on it until
// its readiness budget is spent, long enough to be interrupted mid-way.
const neverHealthy = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    healthcheck:
      test: ["CMD", "false"]
      interval: 1s
      retries: 1000
`

// A signal cancels the command; it cleans up what it started and exits 128+signal: SIGTERM
// during `run`'s command exits 143, SIGINT during `up`'s readiness wait exits 130, and neither
// leaves anything of its task behind. With --json, stdout is still one document, whose error
// is "interrupted".
func TestSignalExitCodesAfterCleanup(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	bin := buildCLI(t)
	cases := []struct {
		name string
		sig  syscall.Signal
		code int
		args func(task, dir string) []string
	}{
		{"run SIGTERM", syscall.SIGTERM, exitTerminated, func(task, _ string) []string {
			return []string{"run", "--json", "--task", task, "--", "sleep", "60"}
		}},
		{"up SIGINT", syscall.SIGINT, exitInterrupted, func(task, dir string) []string {
			return []string{"up", "--json", "--task", task, "--wait-timeout", "2m", dir}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task := uniqueTask("sig")
			removeTaskProjects(t, c, task)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(neverHealthy), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args(task, dir)...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "COMPOSEBOX_STATE_DIR="+t.TempDir())
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			// Interrupt once the sample's container runs: the command is mid-way.
			if !poll(60*time.Second, func() bool {
				list, err := c.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", taskLabel(task)))})
				return err == nil && len(list) > 0
			}) {
				t.Fatalf("the sample's container never ran\nstderr %s", errb.String())
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if got := cmd.ProcessState.ExitCode(); got != tc.code {
				t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", got, tc.code, out.String(), errb.String())
			}
			// The cleanup happened before the exit, not after.
			if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
				t.Errorf("%d resources of the interrupted command left", n)
			}
			var doc struct {
				Error *errorJSON `json:"error"`
			}
			dec := json.NewDecoder(&out)
			if err := dec.Decode(&doc); err != nil || doc.Error == nil || doc.Error.Kind != "interrupted" || doc.Error.ExitCode != tc.code || dec.More() {
				t.Errorf("stdout is not one document with an interrupted error: %+v, %v\n%s", doc.Error, err, out.String())
			}
			if !strings.Contains(errb.String(), "composebox: interrupted: ") {
				t.Errorf("stderr does not report the interruption: %s", errb.String())
			}
		})
	}
}
