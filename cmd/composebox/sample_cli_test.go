package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
)

// upJSON runs `up --json ARGS...`, registers a `down` of the project it started before
// anything is asserted, and fails the test if up did not start one.
func upJSON(t *testing.T, args ...string) upResult {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"up", "--json"}, args...)...)
	var up upResult
	_ = json.Unmarshal([]byte(out), &up)
	if up.Project != "" {
		t.Cleanup(func() {
			if code, _, errOut := runCLI(t, "down", "-v", up.Project); code != 0 && !strings.Contains(errOut, "not_found") {
				t.Errorf("down -v %s: exit %d, %s", up.Project, code, errOut)
			}
		})
	}
	if code != 0 || up.Project == "" {
		t.Fatalf("up %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
	return up
}

// TestUpExecCpDown drives a sample through the verbs a person uses: up (which hands the sample
// over as detached), exec with its exit codes, cp both ways, and down.
func TestUpExecCpDown(t *testing.T) {
	c := testutil.Docker(t)
	t.Setenv("COMPOSEBOX_STATE_DIR", t.TempDir())
	up := upJSON(t, "-d", "--task", "cli-flow", filepath.Join("..", "..", "testdata", "projects", "multi-service"))
	if len(up.Services) != 3 || up.Services[0].Name != "default" || !up.Services[0].Default || up.Services[0].WorkingDir != "/workspace" {
		t.Errorf("up services %+v", up.Services)
	}
	p := up.Project

	cases := []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"exec", "-p", p, "--", "wget", "-qO-", "http://web/"}, 0, "hello from web"},
		{[]string{"exec", "-p", p, "-s", "db", "--", "sh", "-c", "exit 7"}, 7, ""},
		{[]string{"exec", "-p", p, "--", "no-such-binary"}, exitNotFound, ""},
		{[]string{"exec", "-p", p, "--", "/etc/passwd"}, exitCannotRun, ""},
		{[]string{"exec", "-p", p, "--timeout", "300ms", "--", "sleep", "30"}, exitTimeout, ""},
		{[]string{"exec", "-p", p, "-u", "sandbox", "-w", "/tmp", "-e", "GREETING=hi", "--", "sh", "-c", "echo $GREETING $(id -un) $(pwd)"}, 0, "hi sandbox /tmp"},
		{[]string{"exec", "-p", p, "-s", "nope", "--", "true"}, exitFailure, ""},
		{[]string{"exec", "-p", "cbx-no-such-project", "--", "true"}, exitFailure, ""},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.contains) {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q", tc.args, code, tc.code, out, errOut)
		}
	}
	// Output streamed before a timeout is printed once, not again with the error.
	code, out, _ := runCLI(t, "exec", "-p", p, "--timeout", "2s", "--", "sh", "-c", "echo partial; exec sleep 30")
	if code != exitTimeout || out != "partial\n" {
		t.Errorf("exec with partial output then timeout: exit %d, stdout %q", code, out)
	}
	code, out, _ = runCLI(t, "exec", "--json", "-p", p, "--", "sh", "-c", "printf out; printf err >&2; exit 3")
	var res execJSON
	if code != 3 || json.Unmarshal([]byte(out), &res) != nil || res.ExitCode != 3 || res.Stdout == nil || *res.Stdout != "out" ||
		res.Stderr == nil || *res.Stderr != "err" || res.StdoutBase64 != nil {
		t.Errorf("exec --json: exit %d, %q", code, out)
	}
	// A command --timeout killed has one exit code in the document: the process's.
	code, out, _ = runCLI(t, "exec", "--json", "-p", p, "--timeout", "1s", "--", "sleep", "30")
	doc := oneDocument(t, out)
	var e errorJSON
	if code != exitTimeout || string(doc["exit_code"]) != "124" || json.Unmarshal(doc["error"], &e) != nil ||
		e.Kind != "timeout" || e.ExitCode != exitTimeout {
		t.Errorf("exec --json --timeout: exit %d, %s", code, out)
	}
	// Output that is not UTF-8 comes whole, as base64 in stdout_base64 and stderr_base64 in
	// place of stdout and stderr; text beside it stays text.
	code, out, _ = runCLI(t, "exec", "--json", "-p", p, "--", "sh", "-c", `printf 'a\377\000b'; printf 'fine' >&2`)
	doc = oneDocument(t, out)
	var raw []byte
	var text string
	if code != 0 || doc["stdout"] != nil || json.Unmarshal(doc["stdout_base64"], &raw) != nil || string(raw) != "a\xff\x00b" ||
		json.Unmarshal(doc["stderr"], &text) != nil || text != "fine" || doc["stderr_base64"] != nil {
		t.Errorf("exec --json of binary output: exit %d, %s", code, out)
	}

	host := filepath.Join(t.TempDir(), "f.bin")
	data := []byte("line one\nbinary \x00\xff end\n")
	if err := os.WriteFile(host, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "cp", "-p", p, host, "web:/tmp/copied/f.bin"); code != 0 {
		t.Fatalf("cp in: exit %d, %s", code, errOut)
	}
	back := filepath.Join(t.TempDir(), "back.bin")
	if code, _, errOut := runCLI(t, "cp", "-p", p, "web:/tmp/copied/f.bin", back); code != 0 {
		t.Fatalf("cp out: exit %d, %s", code, errOut)
	}
	if got, _ := os.ReadFile(back); string(got) != string(data) {
		t.Errorf("cp round trip: %q, want %q", got, data)
	}
	if code, _, errOut := runCLI(t, "cp", "-p", p, ":/no/such/file", "-"); code != exitFailure || !strings.Contains(errOut, "not_found") {
		t.Errorf("cp of a missing file: exit %d, %s", code, errOut)
	}

	// A detached sample is not stale, even though `up` (this process's run) is over.
	if code, _, errOut := runCLI(t, "cleanup", "--stale", "--task", "cli-flow"); code != 0 {
		t.Fatalf("cleanup --stale: exit %d, %s", code, errOut)
	}
	if n := testutil.Resources(t, c, labels.ComposeProjectLabel+"="+p); n == 0 {
		t.Fatal("cleanup --stale removed a detached sample")
	}
	if code, _, errOut := runCLI(t, "down", "-v", p); code != 0 {
		t.Fatalf("down: exit %d, %s", code, errOut)
	}
	if n := testutil.Resources(t, c, labels.ComposeProjectLabel+"="+p); n != 0 {
		t.Errorf("%d resources left after down", n)
	}
	// Gone now: down names the kind, and the near name of a misspelt project.
	if code, _, errOut := runCLI(t, "down", p); code != exitFailure || !strings.Contains(errOut, "not_found") {
		t.Errorf("down of a removed project: exit %d, %s", code, errOut)
	}
}
