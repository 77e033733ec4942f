package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/composebox/composebox/cleanup/labels"
)

// fakeDaemon answers every request with the status and body its path asks for, or cuts the
// connection, so that the client's own error values can be classified: they are what the
// retrying client sees from a real daemon or a proxy in front of one.
func fakeDaemon(t *testing.T) *client.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var code int
		var kind string
		// /v1.41/containers/<code>-<kind>/json
		parts := strings.Split(r.URL.Path, "/")
		if len(parts) > 3 {
			fmt.Sscanf(strings.Replace(parts[3], "-", " ", 1), "%d %s", &code, &kind)
		}
		switch kind {
		case "cut":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case "json":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprint(w, `{"message":"daemon says no"}`)
		default:
			w.WriteHeader(code)
			fmt.Fprint(w, "<html>bad gateway</html>")
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithOpts(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// daemonErr is the error the client returns for an inspect whose answer how shapes
// ("<status>-<json|text|cut>").
func daemonErr(t *testing.T, c *client.Client, how string) error {
	t.Helper()
	_, err := c.ContainerInspect(t.Context(), how)
	if err == nil {
		t.Fatalf("%s: no error", how)
	}
	return err
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestRetryTransientClassification(t *testing.T) {
	c := fakeDaemon(t)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := closed.Addr().String()
	closed.Close()
	refused, err := client.NewClientWithOpts(client.WithHost("tcp://"+refusedAddr), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = refused.Close() })
	_, refusedErr := refused.ContainerList(t.Context(), container.ListOptions{})
	missing, err := client.NewClientWithOpts(client.WithHost("unix://"+t.TempDir()+"/no.sock"), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = missing.Close() })
	_, missingErr := missing.ContainerList(t.Context(), container.ListOptions{})
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, cancelledErr := c.ContainerList(cancelled, container.ListOptions{})

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"502 from a proxy", daemonErr(t, c, "502-text"), true},
		{"503", daemonErr(t, c, "503-json"), true},
		{"504", daemonErr(t, c, "504-text"), true},
		{"500", daemonErr(t, c, "500-json"), false},
		{"404", daemonErr(t, c, "404-json"), false},
		{"409", daemonErr(t, c, "409-json"), false},
		{"400", daemonErr(t, c, "400-json"), false},
		{"connection cut before an answer", daemonErr(t, c, "0-cut"), true},
		{"connection refused", refusedErr, true},
		{"socket missing (daemon restarting)", missingErr, true},
		{"caller cancelled", cancelledErr, false},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), false},
		{"errdefs unavailable", errdefs.Unavailable(errors.New("shutting down")), true},
		{"reset", fmt.Errorf("post: %w", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"broken pipe", fmt.Errorf("post: %w", syscall.EPIPE), true},
		{"unexpected EOF", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), true},
		{"net timeout", &net.OpError{Op: "dial", Err: timeoutErr{}}, true},
		{"not found", errdefs.NotFound(errors.New("no such container")), false},
		{"conflict", errdefs.Conflict(errors.New("name in use")), false},
		{"plain", errors.New("invalid reference format"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsTransient(tc.err); got != tc.want {
				t.Errorf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	// Classification survives: the 404 and 503 are still what errdefs says they are.
	if err := daemonErr(t, c, "404-json"); !errdefs.IsNotFound(err) {
		t.Errorf("404 lost its class: %v", err)
	}
}

// fakeAPI fails its methods as scripted; everything else is the nil embedded client, so an
// unexpected call panics.
type fakeAPI struct {
	client.APIClient
	calls    map[string]int
	failures map[string][]error // per method, the errors of its first calls
	labels   map[string]string  // labels of the object an inspect finds
}

func (f *fakeAPI) next(op string) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	n := f.calls[op]
	f.calls[op]++
	if n < len(f.failures[op]) {
		return f.failures[op][n]
	}
	return nil
}

func (f *fakeAPI) ContainerStart(context.Context, string, container.StartOptions) error {
	return f.next("ContainerStart")
}

func (f *fakeAPI) ContainerRemove(context.Context, string, container.RemoveOptions) error {
	return f.next("ContainerRemove")
}

func (f *fakeAPI) ContainerCreate(context.Context, *container.Config, *container.HostConfig, *network.NetworkingConfig, *ocispec.Platform, string) (container.CreateResponse, error) {
	if err := f.next("ContainerCreate"); err != nil {
		return container.CreateResponse{}, err
	}
	return container.CreateResponse{ID: "new"}, nil
}

func (f *fakeAPI) ContainerInspect(_ context.Context, name string) (container.InspectResponse, error) {
	if err := f.next("ContainerInspect"); err != nil {
		return container.InspectResponse{}, err
	}
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{ID: "existing", Name: "/" + name}, Config: &container.Config{Labels: f.labels}}, nil
}

func (f *fakeAPI) NetworkCreate(context.Context, string, network.CreateOptions) (network.CreateResponse, error) {
	if err := f.next("NetworkCreate"); err != nil {
		return network.CreateResponse{}, err
	}
	return network.CreateResponse{ID: "new"}, nil
}

func (f *fakeAPI) NetworkInspect(_ context.Context, name string, _ network.InspectOptions) (network.Inspect, error) {
	if err := f.next("NetworkInspect"); err != nil {
		return network.Inspect{}, err
	}
	return network.Inspect{ID: "existing", Name: name, Labels: f.labels}, nil
}

func (f *fakeAPI) ContainerExecCreate(context.Context, string, container.ExecOptions) (container.ExecCreateResponse, error) {
	return container.ExecCreateResponse{}, f.next("ContainerExecCreate")
}

var (
	errReset = fmt.Errorf("post: %w", syscall.ECONNRESET)
	fastPol  = RetryPolicy{Initial: time.Microsecond, Max: time.Microsecond}
)

func TestRetryRetriesLifecycleCallsOnly(t *testing.T) {
	fake := &fakeAPI{failures: map[string][]error{
		"ContainerStart":      {errReset, io.EOF},
		"ContainerExecCreate": {errReset},
	}}
	retries := 0
	pol := fastPol
	pol.OnRetry = func(string, error) { retries++ }
	c := Retrying(fake, pol, nil)
	if err := c.ContainerStart(t.Context(), "x", container.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if fake.calls["ContainerStart"] != 3 || retries != 2 {
		t.Errorf("start: %d calls, %d retries; want 3, 2", fake.calls["ContainerStart"], retries)
	}
	if _, err := c.ContainerExecCreate(t.Context(), "x", container.ExecOptions{}); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("exec create: %v, want the reset", err)
	}
	if fake.calls["ContainerExecCreate"] != 1 {
		t.Errorf("exec create was called %d times: exec must never be retried", fake.calls["ContainerExecCreate"])
	}
	if Retrying(c, RetryPolicy{}, nil) != c {
		t.Error("wrapping twice should return the wrapped client")
	}
}

func TestRetryKeepsErrorsAsTheyAre(t *testing.T) {
	conflict := errdefs.Conflict(errors.New("removal of container x is already in progress"))
	fake := &fakeAPI{failures: map[string][]error{"ContainerRemove": {conflict}}}
	err := Retrying(fake, fastPol, nil).ContainerRemove(t.Context(), "x", container.RemoveOptions{})
	if err != conflict || fake.calls["ContainerRemove"] != 1 {
		t.Errorf("got %v after %d calls; want the very same error after one", err, fake.calls["ContainerRemove"])
	}

	// Attempts run out: the last error, still classified.
	unavailable := errdefs.Unavailable(errors.New("daemon shutting down"))
	fake = &fakeAPI{failures: map[string][]error{"ContainerStart": {unavailable, unavailable, unavailable}}}
	pol := fastPol
	pol.Attempts = 3
	err = Retrying(fake, pol, nil).ContainerStart(t.Context(), "x", container.StartOptions{})
	if err != unavailable || fake.calls["ContainerStart"] != 3 {
		t.Errorf("got %v after %d calls; want the last error after 3", err, fake.calls["ContainerStart"])
	}

	// A not-found on a first removal is the caller's to judge.
	notFound := errdefs.NotFound(errors.New("no such container"))
	fake = &fakeAPI{failures: map[string][]error{"ContainerRemove": {notFound}}}
	if err := Retrying(fake, fastPol, nil).ContainerRemove(t.Context(), "x", container.RemoveOptions{}); err != notFound {
		t.Errorf("first removal: %v, want not found", err)
	}
	// After a lost attempt it means the lost attempt removed it.
	fake = &fakeAPI{failures: map[string][]error{"ContainerRemove": {errReset, notFound}}}
	if err := Retrying(fake, fastPol, nil).ContainerRemove(t.Context(), "x", container.RemoveOptions{}); err != nil {
		t.Errorf("retried removal: %v, want success", err)
	}
}

func TestRetryStopsWhenTheCallerGivesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	fake := &fakeAPI{failures: map[string][]error{"ContainerStart": {errReset, errReset}}}
	// An hour's backoff: only the cancellation can end it.
	pol := RetryPolicy{Initial: time.Hour, Max: time.Hour, OnRetry: func(string, error) { cancel() }}
	err := Retrying(fake, pol, nil).ContainerStart(ctx, "x", container.StartOptions{})
	if !errors.Is(err, syscall.ECONNRESET) || fake.calls["ContainerStart"] != 1 {
		t.Errorf("got %v after %d calls; want the reset after one", err, fake.calls["ContainerStart"])
	}
}

func TestRetryCreateConverges(t *testing.T) {
	mine := map[string]string{labels.ComposeProjectLabel: "cbx-a-1"}
	theirs := map[string]string{labels.ComposeProjectLabel: "cbx-b-2"}
	conflict := errdefs.Conflict(errors.New(`Conflict. The container name "/cbx-a-1-web-1" is already in use`))
	for _, tc := range []struct {
		name     string
		failures []error
		found    map[string]string
		wantID   string
		wantErr  error
	}{
		{name: "lost answer", failures: []error{io.EOF, conflict}, found: mine, wantID: "existing"},
		{name: "someone else's", failures: []error{io.EOF, conflict}, found: theirs, wantErr: conflict},
		{name: "conflict without a retry", failures: []error{conflict}, found: mine, wantErr: conflict},
		{name: "retried create succeeds", failures: []error{io.EOF}, found: mine, wantID: "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeAPI{failures: map[string][]error{"ContainerCreate": tc.failures, "NetworkCreate": tc.failures}, labels: tc.found}
			c := Retrying(fake, fastPol, nil)
			resp, err := c.ContainerCreate(t.Context(), &container.Config{Labels: mine}, nil, nil, nil, "cbx-a-1-web-1")
			if err != tc.wantErr || resp.ID != tc.wantID {
				t.Errorf("container: %q, %v; want %q, %v", resp.ID, err, tc.wantID, tc.wantErr)
			}
			nresp, err := c.NetworkCreate(t.Context(), "cbx-a-1_default", network.CreateOptions{Labels: mine})
			if err != tc.wantErr || nresp.ID != tc.wantID {
				t.Errorf("network: %q, %v; want %q, %v", nresp.ID, err, tc.wantID, tc.wantErr)
			}
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	p := RetryPolicy{}.withDefaults()
	for n, want := range []time.Duration{50, 100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 200 {
			if d := p.delay(n + 1); d < want/2 || d > want {
				t.Fatalf("retry %d: delay %s outside [%s, %s]", n+1, d, want/2, want)
			}
		}
	}
}
