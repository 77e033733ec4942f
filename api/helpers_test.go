package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// keepAlive is a one-service task whose container stays up.
const keepAlive = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

// testServer is a Server on a Unix socket of its own, with a client for it.
type testServer struct {
	srv    *Server
	client *http.Client
	base   string
	token  string
	// sock is the server's socket, for the tests that speak the wire themselves.
	sock string
}

// startServer serves a new orchestrator (state in the test's temp dir) on a private Unix
// socket. Everything the server owns is removed at the end of the test.
func startServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	testutil.BaseImage(t)
	return startServerWith(t, opts)
}

// startServerWith is startServer with more orchestrator options (a backend, say), and no base
// image built first.
func startServerWith(t *testing.T, opts Options, oopts ...orchestrator.Option) *testServer {
	t.Helper()
	if opts.LeaseTTL == 0 {
		// Leases end when a test closes them, not because a loaded machine made it slow.
		opts.LeaseTTL = time.Hour
	}
	o, err := orchestrator.New(append([]orchestrator.Option{orchestrator.WithStateDir(t.TempDir())}, oopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(o, opts)
	// A short directory: a socket path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "cbxapi")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() {
		_ = hs.Close()
		if err := srv.Close(context.Background(), false); err != nil {
			t.Errorf("close server: %v", err)
		}
		_ = o.Close()
		_ = os.RemoveAll(dir)
	})
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &testServer{srv: srv, client: &http.Client{Transport: tr}, base: "http://composebox", sock: sock}
}

// response is a finished request.
type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError decodes an error body and checks its status and kind.
func (r response) wantError(t *testing.T, status int, kind string) Error {
	t.Helper()
	var e Error
	r.json(t, &e)
	if r.status != status || e.Kind != kind {
		t.Fatalf("got %d %+v, want %d %s", r.status, e, status, kind)
	}
	if e.Message == "" {
		t.Fatalf("error without a message: %s", r.body)
	}
	return e
}

func (ts *testServer) do(t *testing.T, method, path string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, body: b, header: resp.Header}
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// lease opens a lease.
func (ts *testServer) lease(t *testing.T) string {
	t.Helper()
	r := ts.do(t, "POST", "/v1/leases", nil, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("open lease: %d %s", r.status, r.body)
	}
	var l Lease
	r.json(t, &l)
	return l.ID
}

// task initialises a task under lease.
func (ts *testServer) task(t *testing.T, lease string, req TaskRequest) Task {
	t.Helper()
	r := ts.do(t, "POST", "/v1/tasks", jsonBody(t, req), map[string]string{leaseHeader: lease})
	if r.status != http.StatusCreated {
		t.Fatalf("init task: %d %s", r.status, r.body)
	}
	var task Task
	r.json(t, &task)
	return task
}

// sample starts a sample of task under lease.
func (ts *testServer) sample(t *testing.T, lease, task string, req SampleRequest) Sample {
	t.Helper()
	r := ts.do(t, "POST", "/v1/tasks/"+task+"/samples", jsonBody(t, req), map[string]string{leaseHeader: lease})
	if r.status != http.StatusCreated {
		t.Fatalf("init sample: %d %s", r.status, r.body)
	}
	var s Sample
	r.json(t, &s)
	return s
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func uniqueName(prefix string) string {
	return prefix + "-" + strings.ToLower(newID("")[:6])
}
