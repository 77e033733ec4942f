package multiengine

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Listings span every engine and name the engine of each result. An engine that does not
// answer leaves its part out, and is named in the error returned with the rest.

// gather runs list on every engine at once and returns the results in one slice, engine by
// engine; seen, when set, is shown each result with its engine first.
func gather[T any](ctx context.Context, b *Backend, list func(ctx context.Context, m *member) ([]T, error), seen func(m *member, v *T)) ([]T, error) {
	lists := make([][]T, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		var err error
		lists[i], err = list(ctx, m)
		if seen != nil {
			for j := range lists[i] {
				seen(m, &lists[i][j])
			}
		}
		return err
	})
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out, err
}

// oldestFirst sorts by creation time, then name.
func oldestFirst[T any](vs []T, key func(v T) (time.Time, string)) {
	slices.SortStableFunc(vs, func(a, c T) int {
		at, an := key(a)
		ct, cn := key(c)
		return cmp.Or(at.Compare(ct), cmp.Compare(an, cn))
	})
}

// Containers lists the containers of every engine that match sel; those of one project come
// from that project's engine alone when it is known.
func (b *Backend) Containers(ctx context.Context, sel []string, all bool) ([]backend.Container, error) {
	project := selectedProject(sel)
	named := func(m *member, c *backend.Container) {
		c.Engine = m.name
		b.learnContainer(cmp.Or(c.Labels[labels.ComposeProjectLabel], project), m, c.ID, c.Name)
	}
	if m, ok := b.placed(project); project != "" && ok && m != nil {
		list, err := m.b.Containers(ctx, sel, all)
		for i := range list {
			named(m, &list[i])
		}
		return list, m.wrap(err)
	}
	out, err := gather(ctx, b, func(ctx context.Context, m *member) ([]backend.Container, error) {
		return m.b.Containers(ctx, sel, all)
	}, named)
	if project != "" && len(out) > 0 {
		// The project is whole on the engine that has it: the others' silence changes nothing.
		return out, nil
	}
	return out, err
}

// OwnedProjects names the projects of task that owner created, on every engine.
func (b *Backend) OwnedProjects(ctx context.Context, task, owner string) ([]string, error) {
	return gather(ctx, b, func(ctx context.Context, m *member) ([]string, error) {
		return backend.OwnedProjects(ctx, m.b, task, owner)
	}, func(m *member, p *string) { b.learn(*p, m) })
}

// ListProjects lists the projects of every engine, oldest first.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	out, err := gather(ctx, b, func(ctx context.Context, m *member) ([]backend.Project, error) {
		return m.b.ListProjects(ctx)
	}, func(m *member, p *backend.Project) {
		p.Engine = m.name
		b.learn(p.Name, m)
	})
	oldestFirst(out, func(p backend.Project) (time.Time, string) { return p.Created, p.Name })
	return out, err
}

// Sweep is backend.Sweep over every engine: ListProjects names each project's engine, and
// Down goes to it.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	return backend.Sweep(ctx, b, sel, opts)
}

// FinishSweep finishes the sweep on every engine whose backend has work to do after one.
func (b *Backend) FinishSweep(ctx context.Context) error {
	_, err := gather(ctx, b, func(ctx context.Context, m *member) ([]struct{}, error) {
		if f, ok := m.b.(backend.SweepFinisher); ok {
			return nil, f.FinishSweep(ctx)
		}
		return nil, nil
	}, nil)
	return err
}
