package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// oneDocument decodes stdout as exactly one JSON object followed by nothing but whitespace.
func oneDocument(t *testing.T, out string) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var doc map[string]json.RawMessage
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, out)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout holds more than one JSON document (%v)\n%s", err, out)
	}
	return doc
}

// diagnostics are the marks of what belongs on stderr: composebox's error lines, the log's
// records and progress lines.
func hasDiagnostics(out string) bool {
	return strings.Contains(out, "composebox: ") || strings.Contains(out, "level=")
}

// TestOutputContractEveryVerb runs every verb with and without --json, in success and in
// failure: with --json, stdout is exactly one JSON document, with error.kind (and the exit code)
// on failure and no error member on success; without it, stdout holds the result and no
// diagnostic, and a failure is one `composebox: <kind>: ` line on stderr. A sample whose
// containers were killed is unavailable (exit 125, with its diagnosis) to exec and cp, and
// `down` removes it; only a sample that does not exist is not_found.
func TestOutputContractEveryVerb(t *testing.T) {
	c := testutil.Docker(t)
	img := testutil.BaseImage(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	task := uniqueTask("contract")
	removeTaskProjects(t, c, task)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(keepAlive), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "compose.yaml"), []byte(keepAlive+"    privileged: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := upJSON(t, "--task", task, dir).Project
	killed := upJSON(t, "--task", task, dir).Project
	ctrs, err := c.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", projectLabel(killed)))})
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("containers of %s: %v, %v", killed, ctrs, err)
	}
	if err := c.ContainerKill(t.Context(), ctrs[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.WaitStopped(t.Context(), c, ctrs[0].ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	deadOwner := labels.Owner{Host: host, PID: os.Getpid(), Start: 1}.String()

	cases := []struct {
		name string
		args []string
		code int
		kind string // "" for success: no error member
		// upped: the case starts a sample, to be removed; its project is on stdout.
		upped bool
		// inMessage must be in the error's message.
		inMessage string
		// removes: the case removes what it names, so its second run (text) finds nothing.
		removes bool
	}{
		{name: "version", args: []string{"version"}},
		{name: "doctor", args: []string{"doctor"}},
		{name: "config", args: []string{"config", dir}},
		{name: "config missing", args: []string{"config", filepath.Join(dir, "nope")}, code: exitFailure, kind: "invalid_config"},
		{name: "config policy", args: []string{"config", bad}, code: exitFailure, kind: "policy_violation"},
		{name: "up", args: []string{"up", "--task", task, dir}, upped: true},
		{name: "up policy", args: []string{"up", "--task", task, bad}, code: exitFailure, kind: "policy_violation"},
		{name: "exec", args: []string{"exec", "-p", live, "--", "echo", "hi"}},
		{name: "exec exit code", args: []string{"exec", "-p", live, "--", "sh", "-c", "exit 3"}, code: 3},
		{name: "exec timeout", args: []string{"exec", "-p", live, "--timeout", "200ms", "--", "sleep", "30"}, code: exitTimeout, kind: "timeout"},
		{name: "exec no project", args: []string{"exec", "--", "true"}, code: exitUsage, kind: "usage"},
		{name: "exec unknown sample", args: []string{"exec", "-p", "cbx-no-such-project", "--", "true"}, code: exitFailure, kind: "not_found"},
		{name: "exec killed sample", args: []string{"exec", "-p", killed, "--", "true"}, code: exitFailure, kind: "unavailable", inMessage: "exit code 137"},
		{name: "cp out", args: []string{"cp", "-p", live, ":/etc/hostname", "-"}},
		{name: "cp in", args: []string{"cp", "-p", live, "-", ":/tmp/from-stdin"}},
		{name: "cp missing file", args: []string{"cp", "-p", live, ":/no/such/file", "-"}, code: exitFailure, kind: "not_found"},
		{name: "cp killed sample", args: []string{"cp", "-p", killed, ":/etc/hostname", "-"}, code: exitFailure, kind: "unavailable", inMessage: "exit code 137"},
		{name: "run", args: []string{"run", "--task", task, dir, "--", "echo", "hi"}},
		{name: "run exit code", args: []string{"run", "--task", task, dir, "--", "sh", "-c", "exit 3"}, code: 3},
		{name: "run policy", args: []string{"run", "--task", task, bad, "--", "true"}, code: exitFailure, kind: "policy_violation"},
		{name: "run image", args: []string{"run", "--image", img, "--task", task, "--", "echo", "hi"}},
		{name: "run image missing", args: []string{"run", "--image", "composebox/no-such-image:1", "--task", task, "--", "true"}, code: exitFailure, kind: "not_found"},
		{name: "run image timeout", args: []string{"run", "--image", img, "--task", task, "--timeout", "200ms", "--", "sleep", "30"}, code: exitTimeout, kind: "timeout"},
		{name: "ls", args: []string{"ls"}},
		{name: "ls usage", args: []string{"ls", "extra"}, code: exitUsage, kind: "usage"},
		{name: "cleanup dry run", args: []string{"cleanup", "--dry-run", "--all", "--task", task}},
		{name: "cleanup usage", args: []string{"cleanup"}, code: exitUsage, kind: "usage"},
		{name: "reap", args: []string{"reap", "--owner", deadOwner}},
		{name: "reap usage", args: []string{"reap", "--owner", "nonsense"}, code: exitUsage, kind: "usage"},
		{name: "unknown verb", args: []string{"nosuchverb"}, code: exitUsage, kind: "usage"},
		{name: "down unknown", args: []string{"down", "cbx-no-such-project"}, code: exitFailure, kind: "not_found"},
		{name: "down killed sample", args: []string{"down", killed}, removes: true},
	}
	for _, tc := range cases {
		for _, asJSON := range []bool{true, false} {
			tc := tc
			if tc.removes && !asJSON {
				tc.code, tc.kind = exitFailure, "not_found"
			}
			name := tc.name + " text"
			args := append([]string{"--progress", "plain"}, tc.args...)
			if asJSON {
				name, args = tc.name+" json", append([]string{"--json"}, args...)
			}
			t.Run(name, func(t *testing.T) {
				code, out, errOut := runCLI(t, args...)
				if tc.upped {
					project := strings.TrimSpace(out)
					if asJSON {
						var up upResult
						_ = json.Unmarshal([]byte(out), &up)
						project = up.Project
					}
					if project != "" {
						t.Cleanup(func() { runCLI(t, "down", project) })
					}
				}
				if code != tc.code {
					t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, out, errOut)
				}
				if asJSON {
					doc := oneDocument(t, out)
					raw, failed := doc["error"]
					if (tc.kind != "") != failed {
						t.Fatalf("error member %s, want kind %q\n%s", raw, tc.kind, out)
					}
					if failed {
						var e errorJSON
						if err := json.Unmarshal(raw, &e); err != nil || e.Kind != tc.kind || e.ExitCode != tc.code || e.Message == "" ||
							!strings.Contains(e.Message, tc.inMessage) {
							t.Errorf("error member %s, want kind %q, exit code %d and %q in its message", raw, tc.kind, tc.code, tc.inMessage)
						}
					}
					return
				}
				if hasDiagnostics(out) {
					t.Errorf("stdout holds diagnostics:\n%s", out)
				}
				// Progress is on stderr, one plain line per service's change.
				if (tc.name == "up" || tc.name == "run") && !strings.Contains(errOut, "composebox: default: healthy") {
					t.Errorf("no progress line for the default service on stderr:\n%s", errOut)
				}
				// Each container's own steps come before its readiness.
				if tc.name == "up" || tc.name == "run" {
					created, started := strings.Index(errOut, "composebox: default: created"), strings.Index(errOut, "composebox: default: started")
					healthy := strings.Index(errOut, "composebox: default: healthy")
					if created < 0 || started < created || healthy < started {
						t.Errorf("no created, started, healthy progress lines in order for the default service on stderr:\n%s", errOut)
					}
				}
				if tc.name == "run" && !strings.Contains(errOut, "composebox: default: removed") {
					t.Errorf("no removal progress line on stderr:\n%s", errOut)
				}
				if tc.kind != "" && !strings.Contains(errOut, "composebox: "+tc.kind+": ") {
					t.Errorf("stderr does not report %s:\n%s", tc.kind, errOut)
				}
				if tc.kind == "" && tc.code == 0 && strings.TrimSpace(out) == "" && !strings.HasPrefix(tc.name, "reap") && !strings.HasPrefix(tc.name, "down unknown") && tc.name != "cp in" {
					t.Errorf("no result on stdout (stderr %s)", errOut)
				}
			})
		}
	}
	if n := testutil.Resources(t, c, projectLabel(killed)); n != 0 {
		t.Errorf("down left %d resources of the killed sample", n)
	}

	// The library answers the same for a killed sample: unavailable, not not_found.
	o, err := orchestrator.New()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	dead := upJSON(t, "--task", task, dir).Project
	if err := c.ContainerKill(t.Context(), containerOf(t, dead), "KILL"); err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		_, err := o.Open(t.Context(), dead)
		return errors.Is(err, errdefs.ErrUnavailable)
	}) {
		_, err := o.Open(t.Context(), dead)
		t.Errorf("Open of a killed sample: %v, want unavailable", err)
	}
	if _, err := o.Open(t.Context(), "cbx-no-such-project"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Open of no sample: %v, want not_found", err)
	}
}

func containerOf(t *testing.T, project string) string {
	t.Helper()
	ctrs, err := testutil.Docker(t).ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", projectLabel(project)))})
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("containers of %s: %v, %v", project, ctrs, err)
	}
	return ctrs[0].ID
}

// A signal's cancellation wins over whatever the verb made of it: 128+signal, and the one
// document's error is "interrupted".
func TestInterruptedExitCodeAndDocument(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(interrupted{sig: sig})
		var out, errb bytes.Buffer
		code := run(ctx, []string{"--json", "version"}, strings.NewReader(""), &out, &errb)
		if want := 128 + int(sig); code != want {
			t.Errorf("%v: exit %d, want %d", sig, code, want)
		}
		var e errorJSON
		doc := oneDocument(t, out.String())
		if err := json.Unmarshal(doc["error"], &e); err != nil || e.Kind != "interrupted" || doc["version"] == nil {
			t.Errorf("%v: document %s", sig, out.String())
		}
		// A verb that runs until signalled (a server) and stopped cleanly exits 0.
		out.Reset()
		g := &globals{stdout: &out, stderr: &errb, stopsOnSignal: true}
		if code := g.finish(ctx, nil); code != 0 || out.Len() != 0 {
			t.Errorf("%v: a clean stop on a signal: exit %d, stdout %q", sig, code, out.String())
		}
	}
}
