package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/api"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// `composebox serve --backend kubernetes`, as the documented service account, serves the API
// from the cluster: a task's samples made over HTTP are namespaces of the task, exec runs in
// their pods, /v1/doctor reports the cluster and its registry (not the local engine), and
// deleting a sample, then the task with its other sample, leaves no namespace of the task; the
// server then stops cleanly.
func TestKubernetesServe(t *testing.T) {
	c := newOnCluster(t)
	task := uniqueTask("k8sserve")
	t.Cleanup(func() {
		_, _, _ = runCLI(t, append(slices.Clone(c.flags), "cleanup", "--all", "--task", task)...)
	})
	// A short directory: a Unix socket's path is at most 108 bytes.
	dir, err := os.MkdirTemp("", "cbxk8s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "api.sock")

	ctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		args := append(slices.Clone(c.flags), "serve", "--json", "--socket", sock, "--lease-ttl", "10m")
		code := run(ctx, args, strings.NewReader(""), pw, &stderr)
		_ = pw.Close()
		done <- code
	}()
	// Cancelling the context stops the server as SIGTERM does: drain, remove what it owns.
	exit, stopped := 0, false
	shutdown := func() int {
		if !stopped {
			stop()
			exit, stopped = <-done, true
		}
		return exit
	}
	t.Cleanup(func() { shutdown() })

	out := bufio.NewReader(pr)
	line, err := out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("ready line: %v (stderr %s)", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	var ready serveReady
	if err := json.Unmarshal(line, &ready); err != nil || ready.Socket != sock {
		t.Fatalf("ready line %q: %v", line, err)
	}

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	var lease string
	call := func(method, path string, body any, want int, into any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://composebox"+path, rd)
		if lease != "" {
			req.Header.Set("X-Composebox-Lease", lease)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s\nserver's stderr:\n%s", method, path, resp.StatusCode, want, b, stderr.String())
		}
		if into != nil {
			if err := json.Unmarshal(b, into); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
	}
	// namespaces are the cluster's namespaces of the task, those being deleted included.
	namespaces := func() []string {
		t.Helper()
		list, err := c.admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: labels.ManagedFilter + "," + labels.LabelTask + "=" + task})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		slices.Sort(names)
		return names
	}

	var l api.Lease
	call("POST", "/v1/leases", nil, http.StatusCreated, &l)
	lease = l.ID
	var tk api.Task
	call("POST", "/v1/tasks", api.TaskRequest{Name: task, ComposeYAML: "services:\n  default:\n    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [tail, -f, /dev/null]\n"},
		http.StatusCreated, &tk)
	var kept, deleted api.Sample
	call("POST", "/v1/tasks/"+tk.ID+"/samples", api.SampleRequest{}, http.StatusCreated, &deleted)
	call("POST", "/v1/tasks/"+tk.ID+"/samples", api.SampleRequest{}, http.StatusCreated, &kept)
	if want := []string{deleted.Project, kept.Project}; !slices.Equal(namespaces(), slices.Sorted(slices.Values(want))) {
		t.Fatalf("the task's namespaces: %v, want its samples' %v", namespaces(), want)
	}
	// A sandbox is a pod of the sample's namespace.
	if sb := deleted.Sandboxes; len(sb) != 1 || sb[0].Container != deleted.Project+"/default" {
		t.Fatalf("sandboxes %+v, want the pod %s/default", sb, deleted.Project)
	}

	var res api.ExecResult
	call("POST", "/v1/samples/"+deleted.Project+"/sandboxes/default/exec",
		api.ExecRequest{Cmd: []string{"sh", "-c", "cat; echo err >&2; exit 3"}, Input: []byte("in the pod\n")}, http.StatusOK, &res)
	if res.ExitCode != 3 || string(res.Stdout) != "in the pod\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("exec: %+v", res)
	}

	var rep backend.Report
	call("GET", "/v1/doctor", nil, http.StatusOK, &rep)
	status := map[string]backend.Status{}
	for _, ch := range rep.Checks {
		status[ch.Name] = ch.Status
	}
	if !rep.OK || status["kubernetes"] != backend.Pass || status["registry"] != backend.Pass {
		t.Fatalf("doctor: %+v, want the cluster and its registry passing", rep)
	}
	if _, ok := status["daemon"]; ok {
		t.Fatalf("doctor checked the local engine, not the cluster the server runs on: %+v", rep)
	}

	call("DELETE", "/v1/samples/"+deleted.Project, nil, http.StatusNoContent, nil)
	c.gone(t, deleted.Project)
	if got := namespaces(); !slices.Equal(got, []string{kept.Project}) {
		t.Fatalf("after deleting sample %s: the task's namespaces %v, want %s's only", deleted.Project, got, kept.Project)
	}
	call("DELETE", "/v1/tasks/"+tk.ID, nil, http.StatusNoContent, nil)
	if got := namespaces(); len(got) != 0 {
		t.Fatalf("after deleting the task: namespaces %v remain", got)
	}
	if code := shutdown(); code != exitOK {
		t.Fatalf("serve: exit %d\n%s", code, stderr.String())
	}
}
