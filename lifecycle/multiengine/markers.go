package multiengine

import (
	"context"
	"time"

	"github.com/composebox/composebox/orchestrator/backend"
)

// Markers live with their project: each goes to the engine that holds the project, so that a
// claim is atomic where the sample is.

func (b *Backend) MarkDetached(ctx context.Context, mk backend.Marker) error {
	m, err := b.projectMember(ctx, mk.Project)
	if err != nil {
		return err
	}
	x, err := optional[backend.Detacher](m, "detach "+mk.Project, "backend.Detacher")
	if err != nil {
		return err
	}
	return m.wrap(x.MarkDetached(ctx, mk))
}

func (b *Backend) MarkWarm(ctx context.Context, mk backend.WarmMarker) error {
	m, err := b.projectMember(ctx, mk.Project)
	if err != nil {
		return err
	}
	x, err := optional[backend.Pooler](m, "mark "+mk.Project+" warm", "backend.Pooler")
	if err != nil {
		return err
	}
	return m.wrap(x.MarkWarm(ctx, mk))
}

func (b *Backend) Claim(ctx context.Context, mk backend.Marker) (bool, error) {
	m, err := b.projectMember(ctx, mk.Project)
	if err != nil {
		return false, err
	}
	x, err := optional[backend.Pooler](m, "claim "+mk.Project, "backend.Pooler")
	if err != nil {
		return false, err
	}
	won, err := x.Claim(ctx, mk)
	return won, m.wrap(err)
}

func (b *Backend) Take(ctx context.Context, project string) (bool, error) {
	m, err := b.projectMember(ctx, project)
	if err != nil {
		return false, err
	}
	x, err := optional[backend.Pooler](m, "take "+project, "backend.Pooler")
	if err != nil {
		return false, err
	}
	won, err := x.Take(ctx, project)
	return won, m.wrap(err)
}

func (b *Backend) RecordClaim(ctx context.Context, mk backend.Marker) error {
	m, err := b.projectMember(ctx, mk.Project)
	if err != nil {
		return err
	}
	x, err := optional[backend.Pooler](m, "claim "+mk.Project, "backend.Pooler")
	if err != nil {
		return err
	}
	return m.wrap(x.RecordClaim(ctx, mk))
}

// WarmProjects lists the free pooled samples of task on every engine, oldest first.
func (b *Backend) WarmProjects(ctx context.Context, task string) ([]backend.WarmProject, error) {
	out, err := gather(ctx, b, func(ctx context.Context, m *member) ([]backend.WarmProject, error) {
		x, err := optional[backend.Pooler](m, "list warm samples", "backend.Pooler")
		if err != nil {
			return nil, err
		}
		return x.WarmProjects(ctx, task)
	}, func(m *member, w *backend.WarmProject) { b.learn(w.Project, m) })
	oldestFirst(out, func(w backend.WarmProject) (time.Time, string) { return w.Created, w.Project })
	return out, err
}
