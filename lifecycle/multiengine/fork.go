package multiengine

import (
	"context"
	"fmt"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Forks over several engines. A recorded state (committed images, copied volumes) lives on
// the engine of the sample it was taken from, and nowhere else: a snapshot, a reset and a
// fork all happen there, and a sample started from a state is placed on that engine too
// (Place with From, else Restore moves it there), whatever the engines' loads say.

var _ backend.Forker = (*Backend)(nil)

// forker is m's engine as a Forker: one that cannot fork says so as an UnsupportedError.
func (m *member) forker(op string) (backend.Forker, error) {
	fk, ok := m.b.(backend.Forker)
	if !ok {
		return nil, &backend.EngineError{Engine: m.name, Err: backend.Unsupported(op, m.b)}
	}
	return fk, nil
}

// ForkCheck says why the engines cannot fork, snapshot or reset (op), nil when every one can.
func (b *Backend) ForkCheck(op string) error {
	for _, m := range b.members {
		if _, err := m.forker(op); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot records the state of req.Project on its engine.
func (b *Backend) Snapshot(ctx context.Context, req backend.SnapshotRequest) (backend.State, error) {
	m, fk, err := b.projectForker(ctx, "snapshot", req.Project)
	if err != nil {
		return backend.State{}, err
	}
	if req.Owner != req.Project {
		// The owner (a task's) has nothing but the state, which lives here.
		b.moveTo(req.Owner, m)
	}
	st, err := fk.Snapshot(ctx, req)
	return st, m.wrap(err)
}

// Restore prepares target to start from st on the engine that holds st, where target is
// placed (moved there, should it have been placed elsewhere).
func (b *Backend) Restore(ctx context.Context, st backend.State, target *types.Project) error {
	m, err := b.stateMember(ctx, st)
	if err != nil {
		return err
	}
	fk, err := m.forker("restore")
	if err != nil {
		return err
	}
	b.moveTo(target.Name, m)
	return m.wrap(fk.Restore(ctx, st, target))
}

// RemoveContainers removes project's containers on its engine.
func (b *Backend) RemoveContainers(ctx context.Context, project string) error {
	m, fk, err := b.projectForker(ctx, "reset", project)
	if err != nil {
		return err
	}
	if err := fk.RemoveContainers(ctx, project); err != nil {
		return m.wrap(err)
	}
	// Their ids and names are stale now: the containers that replace them are learnt afresh.
	b.mu.Lock()
	for _, k := range b.byProject[project] {
		delete(b.containers, k)
	}
	delete(b.byProject, project)
	b.mu.Unlock()
	return nil
}

// RemoveState removes st on the engine that holds it; a state whose engine is not found any
// more went with its sample.
func (b *Backend) RemoveState(ctx context.Context, st backend.State) error {
	m, err := b.stateMember(ctx, st)
	if errdefs.Kind(err) == "not_found" {
		return nil
	}
	if err != nil {
		return err
	}
	fk, err := m.forker("snapshot")
	if err != nil {
		return err
	}
	return m.wrap(fk.RemoveState(ctx, st))
}

// CopyState copies st on the engine that holds it, where the copy stays: req.Owner is placed
// there.
func (b *Backend) CopyState(ctx context.Context, st backend.State, req backend.SnapshotRequest) (backend.State, error) {
	m, err := b.stateMember(ctx, st)
	if err != nil {
		return backend.State{}, err
	}
	fk, err := m.forker("snapshot")
	if err != nil {
		return backend.State{}, err
	}
	b.moveTo(req.Owner, m)
	out, err := fk.CopyState(ctx, st, req)
	return out, m.wrap(err)
}

// FindState finds owner's state name on owner's engine.
func (b *Backend) FindState(ctx context.Context, owner, name string) (backend.State, error) {
	m, fk, err := b.projectForker(ctx, "reset", owner)
	if err != nil {
		return backend.State{}, err
	}
	st, err := fk.FindState(ctx, owner, name)
	if errdefs.Kind(err) == "not_found" {
		return st, err // not the engine's trouble
	}
	return st, m.wrap(err)
}

// projectForker is project's engine and that engine as a Forker.
func (b *Backend) projectForker(ctx context.Context, op, project string) (*member, backend.Forker, error) {
	m, err := b.projectMember(ctx, project)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, project, err)
	}
	fk, err := m.forker(op)
	if err != nil {
		return nil, nil, err
	}
	return m, fk, nil
}

// stateMember is the engine that holds st: that of the project it was taken from, else of the
// project it belongs to.
func (b *Backend) stateMember(ctx context.Context, st backend.State) (*member, error) {
	m, err := b.projectMember(ctx, st.Project)
	if err != nil && st.Owner != "" && st.Owner != st.Project {
		m, err = b.projectMember(ctx, st.Owner)
	}
	if err != nil {
		return nil, fmt.Errorf("state %s of %s: %w", st.Name, st.Owner, err)
	}
	return m, nil
}

// moveTo records project as placed on m, and no longer counted where it was placed before.
func (b *Backend) moveTo(project string, m *member) {
	b.mu.Lock()
	was := b.projects[project]
	b.projects[project] = m
	b.mu.Unlock()
	if was != nil && was != m {
		was.gone(project)
	}
	m.place(project)
}
