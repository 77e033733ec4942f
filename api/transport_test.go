package api

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

func TestListenTCPRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:80", "127.0.0.1"} {
		l, err := ListenTCP(addr)
		if err == nil {
			_ = l.Close()
			t.Errorf("ListenTCP(%q) listened", addr)
			continue
		}
		if !errors.Is(err, errdefs.ErrInvalidConfig) {
			t.Errorf("ListenTCP(%q) = %v, want invalid_config", addr, err)
		}
	}
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatalf("loopback refused: %v", err)
	}
	_ = l.Close()
}

func TestUnixSocketMode(t *testing.T) {
	dir, err := os.MkdirTemp("", "cbxapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "sub", "api.sock")
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(sock))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %v, want 0700", di.Mode().Perm())
	}
	if _, err := ListenUnix(sock); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("second listener on a live socket: %v, want conflict", err)
	}
}

// TestBearerTokenRequiredOnTCP serves on loopback TCP with a token and checks that a request
// without it, or with a wrong one, is unauthorized (401), and one with it is served.
func TestBearerTokenRequiredOnTCP(t *testing.T) {
	o, err := orchestrator.New(orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "tok", "serve.token")
	token, err := WriteToken(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", fi, err)
	}
	srv := New(o, Options{Token: token})
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() {
		_ = hs.Close()
		_ = srv.Close(context.Background(), false)
		_ = o.Close()
	})
	ts := &testServer{srv: srv, client: &http.Client{}, base: "http://" + l.Addr().String()}

	ts.do(t, "GET", "/v1/version", nil, nil).wantError(t, http.StatusUnauthorized, KindUnauthorized)
	ts.do(t, "POST", "/v1/leases", nil, map[string]string{"Authorization": "Bearer nope"}).wantError(t, http.StatusUnauthorized, KindUnauthorized)
	ts.token = token
	r := ts.do(t, "GET", "/v1/version", nil, nil)
	var v Version
	r.json(t, &v)
	if r.status != http.StatusOK || v.API != "v1" || v.APIRevision != APIRevision || APIRevision < 1 {
		t.Fatalf("with the token: %d %s", r.status, r.body)
	}
	r = ts.do(t, "GET", "/v1/openapi.json", nil, nil)
	if r.status != http.StatusOK || string(r.body) != string(openAPI) {
		t.Fatalf("openapi.json: %d, %d bytes", r.status, len(r.body))
	}
}
