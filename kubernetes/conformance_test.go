package kubernetes_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/internal/conformance/orchestrated"
	"github.com/composebox/composebox/orchestrator"
)

// TestConformance runs the exec and file suite against samples on the cluster. A pod's user
// is numeric (a pod spec cannot look a name up in the image), so the base image's sandbox
// user is given as 1000:1000.
func TestConformance(t *testing.T) {
	b := newBackend(t)
	o, err := orchestrator.New(orchestrator.WithBackend(b), orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	tasks := map[string]*orchestrator.Task{}
	for user, spec := range map[string]string{"sandbox": "1000:1000", "root": "0:0"} {
		task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: "conformance-" + user, YAML: []byte(fmt.Sprintf(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    user: "%s"
`, spec))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
		tasks[user] = task
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
