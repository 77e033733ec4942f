package multiengine

import (
	"context"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/orchestrator/backend"
)

// Up starts the project on the engine Place chose (placing it first if nobody did), once the
// engine has every image the project runs.
func (b *Backend) Up(ctx context.Context, p *types.Project, opts backend.UpOptions) error {
	m, ok := b.placed(p.Name)
	if !ok || m == nil {
		if _, err := b.Place(ctx, backend.PlaceRequest{Project: p}); err != nil {
			return err
		}
		m, _ = b.placed(p.Name)
	}
	if err := b.ensureImages(ctx, m, projectImages(p)); err != nil {
		return m.wrap(err)
	}
	return m.wrap(m.b.Up(ctx, p, opts))
}

// Wait waits on the project's engine, and remembers where its containers are.
func (b *Backend) Wait(ctx context.Context, p *types.Project, opts backend.WaitOptions) ([]backend.ServiceState, error) {
	m, err := b.projectMember(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	states, err := m.b.Wait(ctx, p, opts)
	for _, st := range states {
		b.learnContainer(p.Name, m, st.ContainerID, st.Container)
	}
	return states, m.wrap(err)
}

// Down removes the project from its engine. A project this process has not seen is removed
// from every engine where it is (an engine that does not answer is then an error: the project
// may be there).
func (b *Backend) Down(ctx context.Context, project string, opts backend.DownOptions) (backend.Removed, error) {
	m, known := b.placed(project)
	switch {
	case known && m == nil:
		// Placed nowhere: nothing was made.
		b.forget(project)
		return backend.Removed{}, nil
	case known:
		r, err := m.b.Down(ctx, project, opts)
		if err == nil {
			b.forget(project)
		}
		return r, m.wrap(err)
	}
	var mu sync.Mutex
	var total backend.Removed
	err := b.each(ctx, func(ctx context.Context, _ int, m *member) error {
		r, err := m.b.Down(ctx, project, opts)
		mu.Lock()
		total = addRemoved(total, r)
		mu.Unlock()
		return err
	})
	if err == nil {
		b.forget(project)
	}
	return total, err
}

func addRemoved(a, c backend.Removed) backend.Removed {
	return backend.Removed{Containers: a.Containers + c.Containers, Networks: a.Networks + c.Networks,
		Volumes: a.Volumes + c.Volumes, Images: a.Images + c.Images}
}
