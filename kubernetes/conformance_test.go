package kubernetes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/internal/conformance/orchestrated"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/orchestrator"
)

// TestConformance runs the exec and file suite against samples on the cluster, the same
// cases as on Docker. The "unavailable" cases kill the pod's process from the host, through
// the cluster's containerd, as a crash would.
func TestConformance(t *testing.T) {
	b := newBackend(t)
	env := k8stest.Load(t)
	_, admin := env.Client(t)
	o, err := orchestrator.New(orchestrator.WithBackend(b), orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	tasks := map[string]*orchestrator.Task{}
	for user, spec := range map[string]string{"sandbox": "sandbox", "root": "root"} {
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
	}, conformance.WithKill(func(t *testing.T, sb conformance.Sandbox) {
		ns, pod, _ := strings.Cut(sb.ContainerID(), "/")
		env.KillContainer(t, admin, ns, pod)
	}))
}
