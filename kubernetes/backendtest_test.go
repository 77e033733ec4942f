package kubernetes_test

import (
	"testing"

	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backend/backendtest"
)

// TestBackend runs the harness every backend passes on the local cluster (skipped without
// one, unless COMPOSEBOX_K8S_REQUIRED is set).
func TestBackend(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Prefix: "cbxbt-k8s",
		New:    func(t *testing.T) backend.Backend { return newBackend(t) },
	})
}
