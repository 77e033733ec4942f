package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
