package multiengine

import (
	"context"
	"fmt"

	"github.com/composebox/composebox/orchestrator/backend"
)

// Egress allowlists over several engines: a sample's gateway runs beside its services on the
// engine the sample was placed on (each member's Up adds it), so reading, changing and
// following its list go to that engine.

var (
	_ backend.Egress        = (*Backend)(nil)
	_ backend.EgressWatcher = (*Backend)(nil)
	_ backend.EgressChecker = (*Backend)(nil)
)

// egress is m's engine as an Egress: one without allowlists says so, naming the engine.
func (m *member) egress(op string) (backend.Egress, error) {
	e, ok := backend.AsEgress(m.b)
	if !ok {
		return nil, &backend.EngineError{Engine: m.name, Err: backend.Lacks(op, m.b, "backend.Egress")}
	}
	return e, nil
}

// EgressCheck says why the engines cannot enforce an egress allowlist, nil when every one can:
// a task with a list must not land on an engine that would ignore it.
func (b *Backend) EgressCheck() error {
	for _, m := range b.members {
		if _, err := m.egress("egress allowlist"); err != nil {
			return err
		}
	}
	return nil
}

// projectEgress is project's engine and that engine as an Egress.
func (b *Backend) projectEgress(ctx context.Context, op, project string) (*member, backend.Egress, error) {
	m, err := b.projectMember(ctx, project)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, project, err)
	}
	e, err := m.egress(op)
	if err != nil {
		return nil, nil, err
	}
	return m, e, nil
}

// Egress reads project's allowlist and denials on its engine.
func (b *Backend) Egress(ctx context.Context, project string) (backend.EgressState, error) {
	m, e, err := b.projectEgress(ctx, "egress of", project)
	if err != nil {
		return backend.EgressState{}, err
	}
	st, err := e.Egress(ctx, project)
	return st, m.wrapLost(err)
}

// SetEgress replaces project's allowlist on its engine.
func (b *Backend) SetEgress(ctx context.Context, project string, allow []string) error {
	m, e, err := b.projectEgress(ctx, "set egress of", project)
	if err != nil {
		return err
	}
	return m.wrapLost(e.SetEgress(ctx, project, allow))
}

// WatchEgress follows project's denials on its engine.
func (b *Backend) WatchEgress(ctx context.Context, project string, fn func(backend.EgressDenial)) error {
	m, e, err := b.projectEgress(ctx, "follow egress of", project)
	if err != nil {
		return err
	}
	w, ok := e.(backend.EgressWatcher)
	if !ok {
		return &backend.EngineError{Engine: m.name, Err: backend.Lacks("follow egress", m.b, "backend.EgressWatcher")}
	}
	return m.wrapLost(w.WatchEgress(ctx, project, fn))
}
