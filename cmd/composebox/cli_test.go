package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
)

// runCLI runs the CLI in-process and returns its exit code and streams.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	// Not t.Context(): that is cancelled before the cleanups run, and a cleanup's `down` must
	// still work.
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version", "--json")
	var v map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["compose"] != "v2.40.3" {
		t.Fatalf("version --json: exit %d, %q", code, out)
	}
}

func TestUsageErrorExits2(t *testing.T) {
	for _, args := range [][]string{{"doctor", "--no-such-flag"}, {"version", "extra"}, {"--log-level", "loud", "version"}, {"nosuchverb"}, {"exec", "true"}} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.HasPrefix(errOut, "composebox: usage: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a usage line", args, code, errOut)
		}
	}
}

func TestDoctorLive(t *testing.T) {
	testutil.BaseImage(t)
	code, out, errOut := runCLI(t, "doctor")
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "[pass] ") && !strings.HasPrefix(line, "[warn] ") {
			t.Errorf("unexpected doctor line %q", line)
		}
	}
	code, out, _ = runCLI(t, "doctor", "--json")
	var r struct {
		OK     bool
		Checks []struct{ Name, Status string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !r.OK || len(r.Checks) < 6 {
		t.Fatalf("doctor --json: exit %d, %q", code, out)
	}
}

func TestDoctorWithoutDaemonFailsFast(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	start := time.Now()
	code, out, _ := runCLI(t, "doctor")
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("doctor took %s", d)
	}
	if code == 0 || !strings.HasPrefix(out, "[fail] daemon: ") || !strings.Contains(out, "make docker") {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

// TestBogusContextBinary runs the real binary: the docker CLI library's habit is to os.Exit(1)
// silently on a missing context, which only a separate process can observe.
func TestBogusContextBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "composebox")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "doctor", "--json")
	cmd.Env = append(os.Environ(), "DOCKER_HOST=", "DOCKER_CONTEXT=composebox-no-such-context", "DOCKER_CONFIG="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitFailure {
		t.Fatalf("exit %v (%v), want %d\nstdout %s\nstderr %s", cmd.ProcessState, err, exitFailure, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "composebox-no-such-context") {
		t.Errorf("report does not name the missing context: %s", out.String())
	}
}
