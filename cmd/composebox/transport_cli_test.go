package main

import (
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/prereqs"
)

// `composebox doctor` with DOCKER_HOST naming an engine over plain tcp:// warns about it, and
// says how to give it TLS.
func TestDoctorWarnsAboutPlainTCPEngine(t *testing.T) {
	proxy := testutil.NewEngineProxy(t, false)
	t.Setenv("DOCKER_HOST", "tcp://"+proxy.Addr)
	_, r := doctorJSON(t)
	if c := checkNamed(t, r, "engine_transport"); c.Status != prereqs.Warn || !strings.Contains(c.Detail, "without TLS") ||
		!strings.Contains(c.Fix, "DOCKER_TLS_VERIFY") {
		t.Errorf("engine_transport = %+v, want a warning naming the fix", c)
	}
}
