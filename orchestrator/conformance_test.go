package orchestrator_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/orchestrator"
)

// conformanceSandbox adapts orchestrator.Sandbox to the conformance suite.
type conformanceSandbox struct{ *orchestrator.Sandbox }

func (s conformanceSandbox) ExecStream(ctx context.Context, req orchestrator.ExecRequest) (conformance.Process, error) {
	p, err := s.Sandbox.ExecStream(ctx, req)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (s conformanceSandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := s.Sandbox.ReadFileTo(ctx, path, &buf, limit)
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TestConformance runs the exec and file suite through the public API: each sandbox is the
// default service of a real sample, whose user is the one the suite asks for.
func TestConformance(t *testing.T) {
	o, _ := newOrchestrator(t)
	tasks := map[string]*orchestrator.Task{}
	for _, user := range conformance.Users {
		tasks[user] = taskInit(t, o, orchestrator.TaskSpec{Name: "conformance-" + user, YAML: []byte(fmt.Sprintf(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    user: %s
    network_mode: none
`, user))})
	}
	conformance.Run(t, func(t *testing.T, user string) conformance.Sandbox {
		s, err := tasks[user].SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
		return conformanceSandbox{s.Default()}
	})
}
