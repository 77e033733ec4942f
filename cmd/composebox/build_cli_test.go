package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
)

// buildTask writes a task of one service built from dockerfile, on the base image.
func buildTask(t *testing.T, dockerfile string) string {
	t.Helper()
	dir := t.TempDir()
	yaml := "services:\n  default:\n    build:\n      context: .\n      args:\n        " + compose.BaseImageEnv + ": ${" + compose.BaseImageEnv + "}\n" +
		"    command: [\"tail\", \"-f\", \"/dev/null\"]\n"
	df := "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\n" + dockerfile
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A build that fails at a step is build_failed on the CLI too: exit 125, the kind on stderr and
// in the --json document, with the step in the message.
func TestUpReportsBuildFailed(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	marker := fmt.Sprintf("dev.composebox.test-build=cli-%d", time.Now().UnixNano())
	testutil.RemoveLabelledImages(t, c, marker)
	dir := buildTask(t, "LABEL "+marker+"\nRUN exit 9\n")
	task := uniqueTask("buildfail")
	removeTaskProjects(t, c, task)

	code, out, errOut := runCLI(t, "up", "--json", "--task", task, dir)
	var doc struct {
		Error *errorJSON `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Error == nil || doc.Error.Kind != "build_failed" || doc.Error.ExitCode != exitFailure {
		t.Errorf("up --json: exit %d, document %s (%v)", code, out, err)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	code, _, errOut = runCLI(t, "up", "--task", task, dir)
	if code != exitFailure || !strings.Contains(errOut, "composebox: build_failed: ") || !strings.Contains(errOut, "RUN exit 9") {
		t.Errorf("up: exit %d, stderr %q; want 125 and a build_failed line naming the step", code, errOut)
	}
	if left := testutil.LabelledImages(t, c, marker); len(left) > 0 {
		t.Errorf("the failed builds left images: %v", left)
	}
}

// SIGTERM during a build stops it: the process exits 143 within 2 s, and the build's images
// and step container are gone.
func TestUpSIGTERMStopsABuild(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	bin := buildCLI(t)
	marker := fmt.Sprintf("dev.composebox.test-build=sigterm-%d", time.Now().UnixNano())
	testutil.RemoveLabelledImages(t, c, marker)
	stepContainers := func() int {
		list, err := c.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", marker))})
		if err != nil {
			return -1
		}
		return len(list)
	}
	// The RUN step's container, which runs on the image the LABEL step committed.
	sleeping := func() bool {
		list, _ := c.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", marker))})
		for _, ctr := range list {
			if strings.Contains(ctr.Command, "sleep 300") {
				return true
			}
		}
		return false
	}
	t.Cleanup(func() {
		list, _ := c.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", marker))})
		for _, ctr := range list {
			_ = c.ContainerRemove(context.Background(), ctr.ID, container.RemoveOptions{Force: true})
		}
	})
	dir := buildTask(t, "LABEL "+marker+"\nRUN sleep 300\n")
	task := uniqueTask("buildsig")
	removeTaskProjects(t, c, task)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "up", "--task", task, dir)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "COMPOSEBOX_STATE_DIR="+t.TempDir())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !poll(60*time.Second, sleeping) {
		t.Fatalf("the build's RUN step never ran\nstderr %s", errb.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = cmd.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("up exited %v after SIGTERM, want at most 2s", d)
	}
	if got := cmd.ProcessState.ExitCode(); got != exitTerminated {
		t.Errorf("exit %d, want %d\nstderr %s", got, exitTerminated, errb.String())
	}
	if !poll(20*time.Second, func() bool { return stepContainers() == 0 && len(testutil.LabelledImages(t, c, marker)) == 0 }) {
		t.Errorf("after SIGTERM: %d step containers, images %v", stepContainers(), testutil.LabelledImages(t, c, marker))
	}
}
