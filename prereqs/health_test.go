package prereqs

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
)

// The engine health check: a 2.5 s bound and four states. Each fake engine below is a unix
// socket in the test's temp dir, named through DOCKER_HOST.

// fakeEngine listens on a fresh unix socket and points DOCKER_HOST at it.
func fakeEngine(t *testing.T) net.Listener {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("DOCKER_CONTEXT", "")
	return l
}

// "docker daemon ready (server X.Y.Z)".
func TestHealthSeed001Ready(t *testing.T) {
	testutil.Docker(t)
	h := CheckHealth(t.Context(), HealthOptions{})
	if h.State != HealthReady || !h.Ready() || h.ServerVersion == "" || h.Detail != "docker daemon ready (server "+h.ServerVersion+")" {
		t.Fatalf("health %+v", h)
	}
	if c := h.Check(); c.Status != Pass || c.Name != "engine_health" {
		t.Errorf("check %+v", c)
	}
}

// "docker CLI not found"; composebox's counterpart is a missing socket or an
// endpoint that cannot be resolved.
func TestHealthSeed001Missing(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	h := CheckHealth(t.Context(), HealthOptions{})
	if h.State != HealthMissing || !strings.Contains(h.Detail, "docker daemon not found: no socket at /nonexistent/docker.sock") {
		t.Errorf("missing socket: %+v", h)
	}
	if c := h.Check(); c.Status != Fail || !strings.Contains(c.String(), "make docker") {
		t.Errorf("check %s: want a failure saying how to start an engine", c)
	}

	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONTEXT", "composebox-no-such-context")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	h = CheckHealth(t.Context(), HealthOptions{})
	if h.State != HealthMissing || !strings.Contains(h.Detail, "composebox-no-such-context") {
		t.Errorf("missing context: %+v", h)
	}
}

// "docker check timed out": the engine accepts the connection but never answers.
func TestHealthSeed001TimedOut(t *testing.T) {
	l := fakeEngine(t)
	held := make(chan net.Conn, 16)
	t.Cleanup(func() {
		_ = l.Close()
		for len(held) > 0 {
			_ = (<-held).Close()
		}
	})
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case held <- conn: // held open, never answered
			default:
				_ = conn.Close()
			}
		}
	}()
	start := time.Now()
	h := CheckHealth(t.Context(), HealthOptions{Timeout: 300 * time.Millisecond})
	if h.State != HealthTimedOut || !strings.HasPrefix(h.Detail, "docker check timed out") || !strings.Contains(h.Detail, "300ms") {
		t.Errorf("health %+v", h)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the check took %s with a 300ms timeout", d)
	}
	if HealthTimeout != 2500*time.Millisecond {
		t.Errorf("default timeout %s, want 2.5s", HealthTimeout)
	}
}

// "docker daemon unavailable": the engine answers with an error, or the socket
// refuses connections.
func TestHealthSeed001Unavailable(t *testing.T) {
	l := fakeEngine(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"message":"engine is shutting down"}`, http.StatusInternalServerError)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	h := CheckHealth(t.Context(), HealthOptions{})
	if h.State != HealthUnavailable || !strings.HasPrefix(h.Detail, "docker daemon unavailable: ") {
		t.Errorf("erroring engine: %+v", h)
	}
	t.Logf("erroring engine: %s", h.Detail)

	// A socket file nobody listens on any more: connection refused.
	refused := fakeEngine(t)
	refused.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = refused.Close()
	h = CheckHealth(t.Context(), HealthOptions{})
	if h.State != HealthUnavailable || !strings.HasPrefix(h.Detail, "docker daemon unavailable: ") {
		t.Errorf("refused connection: %+v", h)
	}
	t.Logf("refused connection: %s", h.Detail)
}

// Doctor carries the health check as its second line.
func TestDoctorHasEngineHealth(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	r := Doctor(t.Context(), Options{})
	if len(r.Checks) < 2 || r.Checks[0].Name != "daemon" || r.Checks[1].Name != "engine_health" || r.Checks[1].Status != Fail {
		t.Fatalf("checks %+v", r.Checks)
	}
}
