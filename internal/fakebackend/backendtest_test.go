package fakebackend_test

import (
	"testing"

	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backend/backendtest"
)

// TestBackend runs the harness every backend passes on the fake. The fake runs no commands:
// it is told which of the harness's services exit and how, and kills the death watch's victim
// itself.
func TestBackend(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		Prefix: "cbxbt-fake",
		New: func(t *testing.T) backend.Backend {
			f := fakebackend.New()
			f.Exits = map[string]int{backendtest.ServiceOneShot: 0, backendtest.ServiceFailing: backendtest.FailingExitCode}
			f.ExitOutput = map[string]string{backendtest.ServiceFailing: backendtest.FailingOutput + "\n"}
			return f
		},
		Kill: func(t *testing.T, b backend.Backend, s backend.ServiceState) {
			b.(*fakebackend.Backend).Kill(s.ContainerID, 137)
		},
	})
}
