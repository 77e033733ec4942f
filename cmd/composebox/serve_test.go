package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/composebox/composebox/api"
	"github.com/composebox/composebox/internal/testutil"
)

// TestServeBinaryDrainsOnSIGTERM runs the real binary: SIGTERM while a streamed exec is in
// flight lets that exec finish, then removes the server's sample and exits 0.
func TestServeBinaryDrainsOnSIGTERM(t *testing.T) {
	c := testutil.Docker(t)
	testutil.BaseImage(t)
	task := uniqueTask("serve")
	removeTaskProjects(t, c, task)
	bin := filepath.Join(t.TempDir(), "composebox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "cbxserve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "api.sock")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "serve", "--json", "--socket", sock, "--lease-ttl", "10m")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatalf("ready line: %v (stderr %s)", err, stderr.String())
	}
	var ready struct {
		Socket string `json:"socket"`
		PID    int    `json:"pid"`
	}
	if err := json.Unmarshal(line, &ready); err != nil || ready.Socket != sock || ready.PID != srv.Process.Pid {
		t.Fatalf("ready line %q: %v", line, err)
	}

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	call := func(method, path, lease, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, "http://composebox"+path, strings.NewReader(body))
		if lease != "" {
			req.Header.Set("X-Composebox-Lease", lease)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %v %v", method, path, resp.StatusCode, out, err)
		}
		return out
	}
	lease := call("POST", "/v1/leases", "", "")["id"].(string)
	yaml, _ := json.Marshal("services:\n  default:\n    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [tail, -f, /dev/null]\n")
	taskID := call("POST", "/v1/tasks", lease, `{"name":"`+task+`","compose_yaml":`+string(yaml)+`}`)["id"].(string)
	project := call("POST", "/v1/tasks/"+taskID+"/samples", lease, `{}`)["project"].(string)

	req, _ := http.NewRequestWithContext(ctx, "POST", "http://composebox/v1/samples/"+project+"/sandboxes/default/exec/stream",
		strings.NewReader(`{"cmd":["sh","-c","echo started; sleep 2; echo finished"]}`+"\n"))
	req.Header.Set("X-Composebox-Lease", lease)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	if first, err := events.ReadBytes('\n'); err != nil || !bytes.Contains(first, []byte(`"stdout"`)) {
		t.Fatalf("first event %q: %v", first, err)
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The exec in flight is drained: it finishes, with its output and exit event.
	rest, err := readAll(events)
	if err != nil {
		t.Fatalf("the stream in flight was cut: %v (got %q)", err, rest)
	}
	if !bytes.Contains(rest, []byte(`"exit_code":0`)) {
		t.Fatalf("stream after SIGTERM: %q", rest)
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v (stderr %s)", err, stderr.String())
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources of the server's sample left after SIGTERM", n)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func readAll(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		b, err := r.ReadBytes('\n')
		out = append(out, b...)
		if err != nil {
			if len(b) == 0 && bytes.HasSuffix(out, []byte("\n")) {
				return out, nil
			}
			return out, err
		}
	}
}

// TestServeRefusesNonLoopback: --listen on any other address fails before listening.
func TestServeRefusesNonLoopback(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--listen", "0.0.0.0:0"}, strings.NewReader(""), &stdout, &stderr)
	if code == exitOK || !strings.Contains(stderr.String(), "loopback") {
		t.Fatalf("serve --listen 0.0.0.0:0: exit %d, stderr %q", code, stderr.String())
	}
	code = run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--socket", "/tmp/x.sock"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitUsage {
		t.Fatalf("serve with --listen and --socket: exit %d, want %d", code, exitUsage)
	}
}

// servedCLI is `composebox serve` run in this process on a private socket: the verb as a
// user starts it, flags and all.
type servedCLI struct {
	t      *testing.T
	hc     *http.Client
	stderr *syncBuffer
	// lease, once set, goes with every call.
	lease    string
	shutdown func() int
}

// serveCLI starts `composebox [args...] serve --json --socket S --lease-ttl 10m [serveArgs...]`
// and waits for its ready line. Cancelling its context stops it as SIGTERM does: it drains and
// removes what it owns; shutdown returns its exit code, and runs at the latest in cleanup.
func serveCLI(t *testing.T, args []string, serveArgs ...string) *servedCLI {
	t.Helper()
	// A short directory: a Unix socket's path is at most 108 bytes.
	dir, err := os.MkdirTemp("", "cbxserve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "api.sock")

	ctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &servedCLI{t: t, stderr: &syncBuffer{}}
	done := make(chan int, 1)
	go func() {
		all := append(slices.Clone(args), append([]string{"serve", "--json", "--socket", sock, "--lease-ttl", "10m"}, serveArgs...)...)
		code := run(ctx, all, strings.NewReader(""), pw, s.stderr)
		_ = pw.Close()
		done <- code
	}()
	exit, stopped := 0, false
	s.shutdown = func() int {
		if !stopped {
			stop()
			exit, stopped = <-done, true
		}
		return exit
	}
	t.Cleanup(func() { s.shutdown() })

	out := bufio.NewReader(pr)
	line, err := out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("ready line: %v (stderr %s)", err, s.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	var ready serveReady
	if err := json.Unmarshal(line, &ready); err != nil || ready.Socket != sock {
		t.Fatalf("ready line %q: %v", line, err)
	}
	s.hc = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	return s
}

// call sends body as JSON, wants status want, and decodes the answer into into; it returns
// the answer's bytes.
func (s *servedCLI) call(method, path string, body any, want int, into any) []byte {
	t := s.t
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, "http://composebox"+path, rd)
	if s.lease != "" {
		req.Header.Set("X-Composebox-Lease", s.lease)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s\nserver's stderr:\n%s", method, path, resp.StatusCode, want, b, s.stderr.String())
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return b
}

// openLease opens a lease that every later call names.
func (s *servedCLI) openLease() {
	s.t.Helper()
	var l api.Lease
	s.call("POST", "/v1/leases", nil, http.StatusCreated, &l)
	s.lease = l.ID
}

// The serve flags set the ceiling. A request beyond it (a variable the operator does not pass,
// an opt-in it does not allow, a working_dir outside --task-root) is policy_violation naming the
// flag, and the variable's value is in no answer; a request within it runs, reads the variable
// it may and binds from its working_dir. A ceiling that cannot be one is a usage error.
func TestServeCeilingFlags(t *testing.T) {
	for _, args := range [][]string{{"serve", "--task-root", "/"}, {"serve", "--task-root", "/root"}, {"serve", "--allow", "nope"},
		{"serve", "--task-root", "/nonexistent-cbx"}, {"serve", "--policy", "/nonexistent-cbx.yaml"}} {
		want := exitUsage
		if args[1] == "--policy" {
			want = exitFailure // invalid_config, as on up
		}
		if code, _, errOut := runCLI(t, args...); code != want || !strings.Contains(errOut, strings.TrimPrefix(args[1], "--")) {
			t.Errorf("%v: exit %d, want %d naming the flag: %s", args, code, want, errOut)
		}
	}

	testutil.BaseImage(t)
	c := testutil.Docker(t)
	task := uniqueTask("ceiling")
	removeTaskProjects(t, c, task)
	secret := "cbx-serve-secret-" + task
	t.Setenv("CBX_TEST_SERVE_SECRET", secret)
	t.Setenv("CBX_TEST_SERVE_OTHER", secret)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "data.txt"), []byte("task data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serveCLI(t, nil, "--pass-env", "CBX_TEST_SERVE_SECRET", "--allow", "other-containers", "--task-root", root)
	s.openLease()
	yaml := "services:\n  default:\n    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [tail, -f, /dev/null]\n" +
		"    environment: [\"V=${CBX_TEST_SERVE_SECRET}${CBX_TEST_SERVE_OTHER}\"]\n    volumes: [\"./:/task:ro\"]\n"
	for _, tc := range []struct {
		req  api.TaskRequest
		want string
	}{
		{api.TaskRequest{Name: task, ComposeYAML: yaml, WorkingDir: root, PassEnv: []string{"CBX_TEST_SERVE_OTHER"}}, "composebox serve --pass-env CBX_TEST_SERVE_OTHER"},
		{api.TaskRequest{Name: task, ComposeYAML: yaml, WorkingDir: root, Policy: &api.PolicyRequest{Allow: []string{"privileged"}}}, "composebox serve --allow privileged"},
		{api.TaskRequest{Name: task, ComposeYAML: yaml, WorkingDir: t.TempDir()}, "composebox serve --task-root "},
	} {
		var e api.Error
		b := s.call("POST", "/v1/tasks", tc.req, http.StatusUnprocessableEntity, &e)
		if e.Kind != "policy_violation" || !strings.Contains(e.Message, tc.want) || strings.Contains(string(b), secret) {
			t.Errorf("request %+v: %s, want policy_violation naming %q and no secret", tc.req, b, tc.want)
		}
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Fatalf("%d resources of refused tasks", n)
	}

	var tk api.Task
	s.call("POST", "/v1/tasks", api.TaskRequest{Name: task, ComposeYAML: yaml, WorkingDir: root, PassEnv: []string{"CBX_TEST_SERVE_SECRET"},
		Policy: &api.PolicyRequest{Allow: []string{"other-containers"}}}, http.StatusCreated, &tk)
	var sm api.Sample
	s.call("POST", "/v1/tasks/"+tk.ID+"/samples", api.SampleRequest{}, http.StatusCreated, &sm)
	var res api.ExecResult
	s.call("POST", "/v1/samples/"+sm.Project+"/sandboxes/default/exec", api.ExecRequest{Cmd: []string{"sh", "-c", `echo "$V"; cat /task/data.txt`}}, http.StatusOK, &res)
	if string(res.Stdout) != secret+"\ntask data\n" {
		t.Fatalf("the task within the ceiling: %q, want the passed variable alone and the task's file", res.Stdout)
	}
	if code := s.shutdown(); code != exitOK {
		t.Fatalf("serve: exit %d\n%s", code, s.stderr.String())
	}
}
