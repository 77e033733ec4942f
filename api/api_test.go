package api

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
)

// TestSampleExecAndFiles runs a task and a sample through the API and uses every sandbox
// route on it: one-shot and streamed exec (with stdin, non-UTF-8 output, a timeout), files
// (non-UTF-8 bytes, a missing file, a directory), directories as tar, connection, events.
func TestSampleExecAndFiles(t *testing.T) {
	ts := startServer(t, Options{})
	lease := ts.lease(t)
	hdr := map[string]string{leaseHeader: lease}

	events := ts.subscribe(t, lease)

	task := ts.task(t, lease, TaskRequest{Name: uniqueName("api"), ComposeYAML: keepAlive})
	if task.DefaultService != "default" || len(task.Services) != 1 {
		t.Fatalf("task = %+v", task)
	}
	sm := ts.sample(t, lease, task.ID, SampleRequest{Metadata: map[string]string{"K": "v"}})
	if sm.Task != task.ID || sm.DefaultService != "default" || len(sm.Sandboxes) != 1 || !sm.Sandboxes[0].Default {
		t.Fatalf("sample = %+v", sm)
	}
	sb := "/v1/samples/" + sm.Project + "/sandboxes/default"

	// The event stream saw the sample become ready.
	events.waitFor(t, func(e Event) bool { return e.Kind == "sample_healthy" && e.Project == sm.Project })

	// One-shot exec: stdin in, non-UTF-8 bytes out, env and cwd.
	r := ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{
		Cmd:   []string{"sh", "-c", `cat; printf '\377' >&2; echo "$V" "$(pwd)"`},
		Input: []byte("in\x00put"), Env: map[string]string{"V": "x"}, Cwd: "/tmp",
	}), hdr)
	var res ExecResult
	r.json(t, &res)
	if r.status != http.StatusOK || res.ExitCode != 0 || string(res.Stdout) != "in\x00putx /tmp\n" || !bytes.Equal(res.Stderr, []byte{0xff}) {
		t.Fatalf("exec: %d %+v (stdout %q)", r.status, res, res.Stdout)
	}
	// A non-zero exit is a result.
	r = ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", "exit 7"}}), hdr)
	r.json(t, &res)
	if r.status != http.StatusOK || res.ExitCode != 7 {
		t.Fatalf("exit 7: %d %s", r.status, r.body)
	}
	// A timeout is 504 with the partial output.
	r = ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", "echo early; sleep 30"}, TimeoutSeconds: 0.5}), hdr)
	e := r.wantError(t, http.StatusGatewayTimeout, "timeout")
	var partial struct {
		Result ExecResult `json:"result"`
	}
	b, _ := json.Marshal(e.Detail)
	if err := json.Unmarshal(b, &partial); err != nil || string(partial.Result.Stdout) != "early\n" {
		t.Fatalf("timeout detail = %s (%v)", b, err)
	}
	// An unknown service is not_found.
	ts.do(t, "POST", "/v1/samples/"+sm.Project+"/sandboxes/nope/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), hdr).
		wantError(t, http.StatusNotFound, "not_found")

	// Streamed exec: the body after the first line is stdin; events end with exit.
	stream := ts.do(t, "POST", sb+"/exec/stream",
		strings.NewReader(`{"cmd":["sh","-c","cat; echo err >&2; exit 3"]}`+"\n"+"streamed\xfe"), hdr)
	if stream.status != http.StatusOK || stream.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %d %s", stream.status, stream.body)
	}
	var out, errOut []byte
	var last StreamEvent
	for line := range bytes.Lines(stream.body) {
		var ev StreamEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("stream line %q: %v", line, err)
		}
		switch ev.Type {
		case "stdout":
			out = append(out, ev.Data...)
		case "stderr":
			errOut = append(errOut, ev.Data...)
		}
		last = ev
	}
	if string(out) != "streamed\xfe" || string(errOut) != "err\n" || last.Type != "exit" || last.ExitCode == nil || *last.ExitCode != 3 {
		t.Fatalf("stream: stdout %q stderr %q last %+v (error %+v)", out, errOut, last, last.Error)
	}

	// Stdin streams: the command answers a first line before the second is even sent.
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.base+sb+"/exec/stream", pr)
	req.Header.Set(leaseHeader, lease)
	go func() {
		_, _ = pw.Write([]byte(`{"cmd":["sh","-c","read x; echo got-$x; read y; echo got-$y"]}` + "\na\n"))
	}()
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	readEvent := func() StreamEvent {
		t.Helper()
		b, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatalf("interactive stream: %v", err)
		}
		var ev StreamEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("interactive stream line %q: %v", b, err)
		}
		return ev
	}
	if ev := readEvent(); ev.Type != "stdout" || string(ev.Data) != "got-a\n" {
		t.Fatalf("first answer %+v", ev)
	}
	_, _ = pw.Write([]byte("b\n"))
	_ = pw.Close()
	if ev := readEvent(); ev.Type != "stdout" || string(ev.Data) != "got-b\n" {
		t.Fatalf("second answer %+v", ev)
	}
	if ev := readEvent(); ev.Type != "exit" || ev.ExitCode == nil || *ev.ExitCode != 0 {
		t.Fatalf("interactive stream end %+v", ev)
	}

	// Files: non-UTF-8 bytes round trip, parents created.
	data := []byte{0, 0xff, 0xfe, '\n', 'x'}
	r = ts.do(t, "PUT", sb+"/files?path=sub/dir/f.bin", bytes.NewReader(data), hdr)
	if r.status != http.StatusNoContent {
		t.Fatalf("write file: %d %s", r.status, r.body)
	}
	r = ts.do(t, "GET", sb+"/files?path=sub/dir/f.bin", nil, hdr)
	if r.status != http.StatusOK || !bytes.Equal(r.body, data) {
		t.Fatalf("read file: %d %q", r.status, r.body)
	}
	ts.do(t, "GET", sb+"/files?path=/no/such/file", nil, hdr).wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "GET", sb+"/files?path=/tmp", nil, hdr).wantError(t, http.StatusConflict, "is_a_directory")
	ts.do(t, "GET", sb+"/files?path=sub/dir/f.bin&limit=2", nil, hdr).wantError(t, http.StatusRequestEntityTooLarge, "output_limit")
	ts.do(t, "GET", sb+"/files", nil, hdr).wantError(t, http.StatusBadRequest, "invalid_config")
	// An empty file is an empty 200.
	if r := ts.do(t, "PUT", sb+"/files?path=empty", bytes.NewReader(nil), hdr); r.status != http.StatusNoContent {
		t.Fatalf("write empty file: %d %s", r.status, r.body)
	}
	if r := ts.do(t, "GET", sb+"/files?path=empty", nil, hdr); r.status != http.StatusOK || len(r.body) != 0 {
		t.Fatalf("read empty file: %d %q", r.status, r.body)
	}

	// Directories: a tar in, the same files out.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	files := map[string][]byte{"a.txt": []byte("alpha"), "nested/b.bin": {0xff, 0, 1}}
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(content)
	}
	_ = tw.Close()
	r = ts.do(t, "PUT", sb+"/dirs?path=/tmp/up", bytes.NewReader(tb.Bytes()), hdr)
	if r.status != http.StatusNoContent {
		t.Fatalf("write dir: %d %s", r.status, r.body)
	}
	r = ts.do(t, "GET", sb+"/dirs?path=/tmp/up", nil, hdr)
	if r.status != http.StatusOK {
		t.Fatalf("read dir: %d %s", r.status, r.body)
	}
	got := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(r.body))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			got[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
	for name, content := range files {
		if !bytes.Equal(got[name], content) {
			t.Errorf("dir round trip: %s = %q, want %q", name, got[name], content)
		}
	}
	ts.do(t, "GET", sb+"/dirs?path=/no/such/dir", nil, hdr).wantError(t, http.StatusNotFound, "not_found")
	// A file is no directory, either way; and the archives stream through tar, leaving no
	// staged copy in the container.
	ts.do(t, "GET", sb+"/dirs?path=/tmp/up/a.txt", nil, hdr).wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "PUT", sb+"/dirs?path=/tmp/up/a.txt", bytes.NewReader(tb.Bytes()), hdr).wantError(t, http.StatusNotFound, "not_found")
	r = ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", "ls -a /tmp; ls /tmp/up"}}), hdr)
	r.json(t, &res)
	if !strings.Contains(string(res.Stdout), "a.txt") || strings.Contains(string(res.Stdout), "composebox-") {
		t.Errorf("/tmp after the directory transfers: %q", res.Stdout)
	}

	// Connection, sandboxes, listing.
	r = ts.do(t, "GET", sb+"/connection", nil, hdr)
	var conn struct {
		ContainerName string `json:"container_name"`
		Command       string `json:"command"`
	}
	r.json(t, &conn)
	if r.status != http.StatusOK || conn.ContainerName != sm.Sandboxes[0].ContainerName || conn.Command == "" {
		t.Fatalf("connection: %d %s", r.status, r.body)
	}
	var list struct{ Samples []Sample }
	ts.do(t, "GET", "/v1/samples?task="+task.ID, nil, hdr).json(t, &list)
	if len(list.Samples) != 1 || list.Samples[0].Project != sm.Project {
		t.Fatalf("samples = %+v", list)
	}

	// Removing the sample removes its containers.
	if r := ts.do(t, "DELETE", "/v1/samples/"+sm.Project, nil, hdr); r.status != http.StatusNoContent {
		t.Fatalf("delete sample: %d %s", r.status, r.body)
	}
	if n := projectContainers(t, sm.Project); n != 0 {
		t.Fatalf("%d containers left after DELETE", n)
	}
	ts.do(t, "GET", "/v1/samples/"+sm.Project, nil, hdr).wantError(t, http.StatusNotFound, "not_found")
	if r := ts.do(t, "DELETE", "/v1/tasks/"+task.ID, nil, hdr); r.status != http.StatusNoContent {
		t.Fatalf("delete task: %d %s", r.status, r.body)
	}
	ts.do(t, "GET", "/v1/tasks/"+task.ID, nil, hdr).wantError(t, http.StatusNotFound, "not_found")
}

// TestLeaseExpiryRemovesSamples lets a lease miss its heartbeats and checks that its sample's
// containers go, while the sample of a live lease stays; closing that lease then removes its
// sample and its task.
func TestLeaseExpiryRemovesSamples(t *testing.T) {
	ts := startServer(t, Options{})
	kept := ts.lease(t)
	r := ts.do(t, "POST", "/v1/leases", jsonBody(t, map[string]any{"ttl_seconds": 1}), nil)
	var short Lease
	r.json(t, &short)
	if r.status != http.StatusCreated || short.TTLSeconds != 1 {
		t.Fatalf("open lease: %d %s", r.status, r.body)
	}
	// Keep the short lease alive while its sample starts, as a client's heartbeat would.
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				ts.do(t, "POST", "/v1/leases/"+short.ID+"/heartbeat", nil, nil)
			}
		}
	}()
	task := ts.task(t, kept, TaskRequest{Name: uniqueName("lease"), ComposeYAML: keepAlive})
	shortTask := ts.task(t, short.ID, TaskRequest{Name: uniqueName("lease"), ComposeYAML: keepAlive})
	doomed := ts.sample(t, short.ID, shortTask.ID, SampleRequest{})
	survivor := ts.sample(t, kept, task.ID, SampleRequest{})
	keptHdr, shortHdr := map[string]string{leaseHeader: kept}, map[string]string{leaseHeader: short.ID}
	close(stop)
	<-beating

	eventually(t, 30*time.Second, "expired lease's sample removed", func() bool {
		return ts.do(t, "GET", "/v1/samples/"+doomed.Project, nil, shortHdr).status == http.StatusNotFound &&
			projectContainers(t, doomed.Project) == 0
	})
	ts.do(t, "POST", "/v1/leases/"+short.ID+"/heartbeat", nil, nil).wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "GET", "/v1/tasks/"+shortTask.ID, nil, shortHdr).wantError(t, http.StatusNotFound, "not_found")
	r = ts.do(t, "POST", "/v1/samples/"+survivor.Project+"/sandboxes/default/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), keptHdr)
	if r.status != http.StatusOK {
		t.Fatalf("the live lease's sample: %d %s", r.status, r.body)
	}

	if r := ts.do(t, "DELETE", "/v1/leases/"+kept, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("close lease: %d %s", r.status, r.body)
	}
	if n := projectContainers(t, survivor.Project); n != 0 {
		t.Fatalf("%d containers left after closing the lease", n)
	}
	ts.do(t, "GET", "/v1/tasks/"+task.ID, nil, keptHdr).wantError(t, http.StatusNotFound, "not_found")
}

// TestErrorStatuses checks the error body and status of failures at each layer: the request,
// the lease, the policy, and the per-lease bound.
func TestErrorStatuses(t *testing.T) {
	ts := startServer(t, Options{MaxPerLease: 1})
	lease := ts.lease(t)
	hdr := map[string]string{leaseHeader: lease}

	ts.do(t, "POST", "/v1/tasks", strings.NewReader("{"), hdr).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "POST", "/v1/tasks", strings.NewReader(`{"nmae":"x"}`), hdr).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{ComposeYAML: keepAlive}), nil).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{ComposeYAML: keepAlive}), map[string]string{leaseHeader: "l-nope"}).
		wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{Path: "relative/compose.yaml"}), hdr).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{Name: uniqueName("priv"), ComposeYAML: `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    privileged: true
`}), hdr).wantError(t, http.StatusUnprocessableEntity, "policy_violation")
	ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{ComposeYAML: keepAlive, Policy: &PolicyRequest{Allow: []string{"everything"}}}), hdr).
		wantError(t, http.StatusBadRequest, "invalid_config")
	big := bytes.Repeat([]byte("x"), DefaultMaxJSONBody+10)
	ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{ComposeYAML: string(big)}), hdr).wantError(t, http.StatusBadRequest, "invalid_config")
	ts.do(t, "GET", "/v1/samples/cbx-nope-123/sandboxes", nil, hdr).wantError(t, http.StatusNotFound, "not_found")
	ts.do(t, "GET", "/v1/nowhere", nil, nil).wantError(t, http.StatusNotFound, "not_found")

	// The lease's one slot is held by a running streamed exec: another request of the lease
	// is busy, and cutting the stream kills the command and frees the slot.
	task := ts.task(t, lease, TaskRequest{Name: uniqueName("busy"), ComposeYAML: keepAlive})
	sm := ts.sample(t, lease, task.ID, SampleRequest{})
	sb := "/v1/samples/" + sm.Project + "/sandboxes/default"
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.base+sb+"/exec/stream",
		strings.NewReader(`{"cmd":["sh","-c","echo started; exec sleep 300"]}`+"\n"))
	req.Header.Set(leaseHeader, lease)
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil || !bytes.Contains(line, []byte(`"stdout"`)) {
		t.Fatalf("first stream event %q: %v", line, err)
	}
	busy := ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), hdr)
	// The answer says how long to wait and what the bound is, for clients that retry.
	if e := busy.wantError(t, http.StatusTooManyRequests, KindBusy); e.Detail["retry_after_seconds"] != BusyRetryAfter.Seconds() ||
		e.Detail["max_per_lease"] != float64(1) || busy.header.Get("Retry-After") != "1" {
		t.Fatalf("busy answer without its hint: %+v, Retry-After %q", e, busy.header.Get("Retry-After"))
	}
	c := testutil.Docker(t)
	sleeps := func() int {
		top, err := c.ContainerTop(t.Context(), sm.Sandboxes[0].Container, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range top.Processes {
			if strings.Contains(strings.Join(p, " "), "sleep 300") {
				n++
			}
		}
		return n
	}
	if n := sleeps(); n != 1 {
		t.Fatalf("%d streamed commands running, want 1", n)
	}
	cancel()
	_ = resp.Body.Close()
	eventually(t, 30*time.Second, "the cut stream's command killed", func() bool { return sleeps() == 0 })
	eventually(t, 30*time.Second, "the lease's slot given back", func() bool {
		return ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), hdr).status == http.StatusOK
	})
	// A stopped container is unavailable.
	if err := c.ContainerStop(t.Context(), sm.Sandboxes[0].Container, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"true"}}), hdr).wantError(t, http.StatusServiceUnavailable, "unavailable")
}

// projectContainers counts the containers of a compose project, whatever their state.
func projectContainers(t *testing.T, project string) int {
	t.Helper()
	c := testutil.Docker(t)
	list, err := c.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labels.ComposeProjectLabel+"="+project))})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// eventStream is a live /v1/events subscription.
type eventStream struct {
	lines chan Event
}

// subscribe opens /v1/events of a lease for the rest of the test.
func (ts *testServer) subscribe(t *testing.T, lease string) *eventStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.base+"/v1/events", nil)
	req.Header.Set(leaseHeader, lease)
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	es := &eventStream{lines: make(chan Event, 1024)}
	go func() {
		defer close(es.lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				es.lines <- e
			}
		}
	}()
	return es
}

// waitFor reads events until one matches.
func (es *eventStream) waitFor(t *testing.T, match func(Event) bool) {
	t.Helper()
	es.until(t, match)
}
