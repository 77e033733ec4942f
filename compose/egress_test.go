package compose

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

func egressProject() *types.Project {
	return &types.Project{Name: "p", Services: types.Services{
		"agent":  {Name: "agent", Extensions: types.Extensions{EgressExtension: []any{"pkgs.test"}}},
		"helper": {Name: "helper"},
	}}
}

// TestEgressCeiling: x-egress beyond --egress is a policy_violation naming the flag that would
// allow it; within it, each service gets its own list, and a service without one the ceiling.
func TestEgressCeiling(t *testing.T) {
	p := DefaultPolicy()
	p.Egress = []string{"pkgs.test"}
	proj := egressProject()
	if err := p.Check(proj); err != nil {
		t.Fatalf("x-egress within the ceiling refused: %v", err)
	}
	p.ApplyDefaults(proj)
	if got, ok := EgressOf(proj.Services["agent"]); !ok || !slices.Equal(got, []string{"pkgs.test"}) {
		t.Errorf("agent's list = %v %v", got, ok)
	}
	if got, ok := EgressOf(proj.Services["helper"]); !ok || !slices.Equal(got, []string{"pkgs.test"}) {
		t.Errorf("helper's list = %v %v, want the ceiling", got, ok)
	}

	proj = egressProject()
	proj.Services["agent"].Extensions[EgressExtension] = []any{"pkgs.test", "other.test"}
	err := p.Check(proj)
	var pe *PolicyError
	if !errors.Is(err, ErrPolicyViolation) || !errors.As(err, &pe) || len(pe.Violations) != 1 || pe.Violations[0].OptIn != "--egress other.test" {
		t.Fatalf("x-egress beyond the ceiling: %v", err)
	}
	if !strings.Contains(err.Error(), "allow with --egress other.test") {
		t.Errorf("message %q does not name the flag", err)
	}
}

// TestNoEgressUnchanged: without --egress or x-egress nothing changes.
func TestNoEgressUnchanged(t *testing.T) {
	p := DefaultPolicy()
	proj := &types.Project{Name: "p", Services: types.Services{"a": {Name: "a"}}}
	p.ApplyDefaults(proj)
	if _, ok := EgressOf(proj.Services["a"]); ok || len(proj.Networks) != 0 {
		t.Errorf("a task without egress got %+v", proj.Services["a"])
	}
}
