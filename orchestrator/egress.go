package orchestrator

import (
	"context"
	"fmt"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// EgressState is a sample's allowlist and the attempts its gateway refused.
type EgressState = backend.EgressState

func (o *Orchestrator) egressBackend(project string) (backend.Egress, error) {
	b, ok := backend.AsEgress(o.backend)
	if !ok {
		return nil, cbxerr.New(cbxerr.ErrPrerequisite, fmt.Sprintf("egress of %s: the %s backend has no egress allowlists", project, o.backend.Kind()))
	}
	return b, nil
}

// Egress reads a sample's allowlist and its egress_denied attempts, by project name.
func (o *Orchestrator) Egress(ctx context.Context, project string) (EgressState, error) {
	b, err := o.egressBackend(project)
	if err != nil {
		return EgressState{}, err
	}
	return b.Egress(ctx, project)
}

// SetEgress replaces the allowlist (NAME[:PORT]) of every service of a live sample, by project
// name: a runner opens a package index for setup and closes it for the agent.
func (o *Orchestrator) SetEgress(ctx context.Context, project string, allow []string) error {
	b, err := o.egressBackend(project)
	if err != nil {
		return err
	}
	return b.SetEgress(ctx, project, allow)
}

// SetEgress replaces the allowlist of every service of the sample (see Orchestrator.SetEgress).
func (s *Sample) SetEgress(ctx context.Context, allow ...string) error {
	return s.o.SetEgress(ctx, s.project, allow)
}

// Egress reads the sample's allowlist and its denials.
func (s *Sample) Egress(ctx context.Context) (EgressState, error) {
	return s.o.Egress(ctx, s.project)
}
