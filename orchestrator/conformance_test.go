package orchestrator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/internal/conformance/orchestrated"
	"github.com/composebox/composebox/orchestrator"
)

// TestConformance runs the exec and file suite through the public API: each sandbox is the
// default service of a real sample, whose user is the one the suite asks for.
func TestConformance(t *testing.T) {
	o, _ := newOrchestrator(t)
	tasks := map[string]*orchestrator.Task{}
	for _, user := range conformance.Users {
		tasks[user] = taskInit(t, o, orchestrator.TaskSpec{Name: "conformance-" + user, YAML: conformanceYAML(user)})
	}
	conformance.Run(t, func(t *testing.T, user string) conformance.Sandbox {
		s, err := tasks[user].SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
		return orchestrated.Sandbox{Sandbox: s.Default()}
	})
}

// conformanceYAML is the project of the suite's sandboxes: the base image, kept alive, as user.
func conformanceYAML(user string) []byte {
	return fmt.Appendf(nil, `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    user: %s
    network_mode: none
`, user)
}
