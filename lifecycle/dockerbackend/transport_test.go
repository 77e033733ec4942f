package dockerbackend

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

// An engine reached over tcp:// without TLS is a warning, once, on the logger when it is first
// pinged (at start), and a warning in doctor; the same engine behind TLS, or on its socket, is
// neither.
func TestPlainTCPEngineIsWarnedAbout(t *testing.T) {
	plain := testutil.NewEngineProxy(t, false)
	secure := testutil.NewEngineProxy(t, true)
	for _, tc := range []struct {
		name string
		ep   engine.Endpoint
		warn bool
	}{
		{"plain tcp", engine.Endpoint{Host: "tcp://" + plain.Addr}, true},
		{"tcp with TLS", engine.Endpoint{Host: "tcp://" + secure.Addr, TLSDir: secure.CertDir}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer // the handler serialises its writes; read once the pings are done
			b, err := FromEndpoint(tc.ep, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Name: "remote"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			for range 2 {
				if _, err := b.Ping(t.Context(), 0); err != nil {
					t.Fatalf("ping: %v", err)
				}
			}
			warned := strings.Count(logs.String(), "without TLS")
			if tc.warn && (warned != 1 || !strings.Contains(logs.String(), "level=WARN")) {
				t.Errorf("log after two pings:\n%s\nwant one warning about plain tcp", logs.String())
			}
			if !tc.warn && warned != 0 {
				t.Errorf("log: %s, want no warning", logs.String())
			}
			found := false
			for _, c := range b.Doctor(t.Context(), backend.DoctorOptions{}).Checks {
				if c.Name == "engine_transport" {
					found = true
					if c.Status != "warn" || !strings.Contains(c.Detail, "without TLS") || !strings.Contains(c.Fix, "tls=CERTDIR") {
						t.Errorf("doctor's engine_transport: %+v", c)
					}
				}
			}
			if found != tc.warn {
				t.Errorf("doctor has an engine_transport check: %v, want %v", found, tc.warn)
			}
		})
	}
	if c := testutil.Docker(t); engine.PlainTCP(t.Context(), c, 0) {
		t.Errorf("the local socket %s is taken for plain tcp", c.DaemonHost())
	}
}
