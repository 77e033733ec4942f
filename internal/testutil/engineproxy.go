package testutil

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EngineProxy serves the local engine's API on a TCP port of loopback, as an engine listening
// on TCP would: over TLS when tlsOn (the server's certificate is the CA in CertDir's ca.pem),
// else in the clear. It stops at the end of the test.
type EngineProxy struct {
	Addr    string // host:port
	CertDir string // holds ca.pem, when over TLS
}

// NewEngineProxy starts an EngineProxy.
func NewEngineProxy(t testing.TB, tlsOn bool) EngineProxy {
	t.Helper()
	Docker(t)
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sock = strings.TrimPrefix(h, "unix://")
	}
	p := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	p.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	srv := httptest.NewUnstartedServer(p)
	ep := EngineProxy{Addr: srv.Listener.Addr().String()}
	if !tlsOn {
		srv.Start()
		t.Cleanup(srv.Close)
		return ep
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ep.CertDir = t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(ep.CertDir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	return ep
}
