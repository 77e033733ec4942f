package dockerbackend_test

import (
	"testing"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backend/backendtest"
)

// TestBackend runs the harness every backend passes on the host's engine.
func TestBackend(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Prefix: "cbxbt-docker",
		New: func(t *testing.T) backend.Backend {
			b, err := dockerbackend.New(testutil.Docker(t), dockerbackend.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
	})
}
