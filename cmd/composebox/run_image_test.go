package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
)

// The one-shot form through the CLI: `run --image` runs one command in a fresh container with
// the workspace bind-mounted (its edits land on the host), the limits applied, and the
// command's exit code passed through; nothing is left afterwards.
func TestRunImageSeed002PassesExitCodeAndEditsLand(t *testing.T) {
	c := testutil.Docker(t)
	img := testutil.BaseImage(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	task := "cli-image-" + compose.NewSampleID()
	t.Cleanup(func() {
		// t.Context() is already done in cleanups.
		n, err := testutil.Count(context.Background(), c, filters.Arg("label", labels.LabelTask+"="+task))
		if err != nil || n != 0 {
			t.Errorf("%d resources of task %s left (%v)", n, task, err)
		}
	})
	ws, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat /data/in.txt; echo "edited by $WHO" > out.txt; ls /sys/class/net; ` +
		`cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; echo oops >&2; exit 7`
	code, out, errOut := runCLI(t, "run", "--image", img, "--task", task, "--workspace", ws, "--memory", "64m", "--pids", "50",
		"--mount", data+":/data:ro", "-e", "WHO=cli", "--", "sh", "-c", script)
	if code != 7 {
		t.Fatalf("exit %d, want the command's 7\nstdout %s\nstderr %s", code, out, errOut)
	}
	if want := "from the host\nlo\n67108864\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "oops") {
		t.Errorf("stderr %q does not carry the command's", errOut)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "edited by cli\n" {
		t.Errorf("--workspace edit on the host: %q, %v", b, err)
	}

	// --json prints exec's shape; --workdir moves the workspace.
	code, out, _ = runCLI(t, "--json", "run", "--image", img, "--task", task, "--workspace", ws, "--workdir", "/work", "--", "sh", "-c", "pwd; cat out.txt")
	var res execJSON
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Stdout == nil || *res.Stdout != "/work\nedited by cli\n" {
		t.Errorf("--json: exit %d, %q", code, out)
	}
	code, _, _ = runCLI(t, "run", "--image", img, "--task", task, "--timeout", "300ms", "--", "sleep", "30")
	if code != exitTimeout {
		t.Errorf("--timeout: exit %d, want %d", code, exitTimeout)
	}
}

// A mount the policy refuses and a network it forbids fail before anything starts;
// spec flags without --image, or with a PATH, are usage errors.
func TestRunImageRejects(t *testing.T) {
	img := testutil.BaseImage(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	cases := []struct {
		args []string
		code int
		kind string
	}{
		{[]string{"run", "--image", img, "--network", "host", "--", "true"}, exitFailure, "policy_violation"},
		{[]string{"run", "--image", img, "--mount", "/etc:/host-etc:ro", "--", "true"}, exitFailure, "policy_violation"},
		{[]string{"run", "--image", img, "--mount", "/tmp:/workspace/tmp", "--", "true"}, exitFailure, "invalid_config"},
		{[]string{"run", "--image", "composebox/no-such-image:1", "--", "true"}, exitFailure, "not_found"},
		{[]string{"run", "--memory", "64m", "--", "true"}, exitUsage, "usage"},
		{[]string{"run", "--image", img, ".", "--", "true"}, exitUsage, "usage"},
		{[]string{"run", "--image", img, "--memory", "lots", "--", "true"}, exitUsage, "usage"},
		{[]string{"run", "--image", img, "--mount", "nocolon", "--", "true"}, exitUsage, "usage"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != c.code || !strings.HasPrefix(errOut, "composebox: "+c.kind+": ") {
			t.Errorf("%v: exit %d, stderr %q; want %d and kind %s", c.args, code, errOut, c.code, c.kind)
		}
	}
}

// The compose form of run is unchanged beside --image: no PATH means the default image.
func TestRunProjectFormStillPassesExitCode(t *testing.T) {
	testutil.BaseImage(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	code, out, errOut := runCLI(t, "run", "--task", "cli-run-"+compose.NewSampleID(), "--", "sh", "-c", "echo hi; exit 3")
	if code != 3 || out != "hi\n" {
		t.Errorf("run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
