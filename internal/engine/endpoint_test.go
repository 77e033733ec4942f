package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/errdefs"
)

func TestParseEndpointRoundTrips(t *testing.T) {
	for _, s := range []string{
		"unix:///var/run/docker.sock",
		"tcp://10.0.0.5:2376?tls=%2Fetc%2Fcerts",
		"tcp://127.0.0.1:2375",
		"ssh://me@host:2222",
		"context:remote",
	} {
		e, err := ParseEndpoint(s)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if e.String() != s {
			t.Errorf("%s parsed and printed is %s", s, e.String())
		}
	}
	e, _ := ParseEndpoint("tcp://h:2376?tls=/etc/certs")
	if e.Host != "tcp://h:2376" || e.TLSDir != "/etc/certs" {
		t.Errorf("tls setting not taken apart: %+v", e)
	}
}

func TestEndpointClientNeedsItsCertificates(t *testing.T) {
	dir := t.TempDir()
	_, err := Endpoint{Host: "tcp://127.0.0.1:1", TLSDir: dir}.Client()
	if !errors.Is(err, errdefs.ErrPrerequisite) || !strings.Contains(err.Error(), "ca.pem") {
		t.Fatalf("a TLS directory without ca.pem: %v, want ErrPrerequisite naming ca.pem", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// cert.pem without key.pem: half a client identity is refused rather than dropped.
	if _, err := (Endpoint{Host: "tcp://127.0.0.1:1", TLSDir: dir}).Client(); !errors.Is(err, errdefs.ErrPrerequisite) {
		t.Fatalf("cert.pem without key.pem: %v, want ErrPrerequisite", err)
	}
}
