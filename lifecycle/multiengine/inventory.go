package multiengine

import (
	"cmp"
	"context"
	"slices"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Listings span every engine and name the engine of each result. An engine that does not
// answer leaves its part out, and is named in the error returned with the rest.

// Containers lists the containers of every engine that match sel; those of one project come
// from that project's engine alone when it is known.
func (b *Backend) Containers(ctx context.Context, sel []string, all bool) ([]backend.Container, error) {
	project := selectedProject(sel)
	if m, ok := b.placed(project); project != "" && ok && m != nil {
		list, err := m.b.Containers(ctx, sel, all)
		b.named(m, project, list)
		return list, m.wrap(err)
	}
	lists := make([][]backend.Container, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		var err error
		lists[i], err = m.b.Containers(ctx, sel, all)
		b.named(m, project, lists[i])
		return err
	})
	var out []backend.Container
	for _, l := range lists {
		out = append(out, l...)
	}
	if project != "" && len(out) > 0 {
		// The project is whole on the engine that has it: the others' silence changes nothing.
		return out, nil
	}
	return out, err
}

// named sets each container's engine, and remembers where it is.
func (b *Backend) named(m *member, project string, list []backend.Container) {
	for i := range list {
		list[i].Engine = m.name
		b.learnContainer(cmp.Or(list[i].Labels[labels.ComposeProjectLabel], project), m, list[i].ID, list[i].Name)
	}
}

// OwnedProjects names the projects of task that owner created, on every engine.
func (b *Backend) OwnedProjects(ctx context.Context, task, owner string) ([]string, error) {
	lists := make([][]string, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		var err error
		lists[i], err = m.b.OwnedProjects(ctx, task, owner)
		for _, p := range lists[i] {
			b.learn(p, m)
		}
		return err
	})
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out, err
}

// ListProjects lists the projects of every engine, oldest first.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	lists := make([][]backend.Project, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		var err error
		lists[i], err = m.b.ListProjects(ctx)
		for j := range lists[i] {
			lists[i][j].Engine = m.name
			b.learn(lists[i][j].Name, m)
		}
		return err
	})
	return mergeProjects(lists), err
}

func mergeProjects(lists [][]backend.Project) []backend.Project {
	var out []backend.Project
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortStableFunc(out, func(a, c backend.Project) int {
		return cmp.Or(a.Created.Compare(c.Created), cmp.Compare(a.Name, c.Name))
	})
	return out
}

// Sweep sweeps every engine with sel; each result names its engine.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	lists := make([][]backend.SweepResult, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		var err error
		lists[i], err = m.b.Sweep(ctx, sel, opts)
		for j := range lists[i] {
			r := &lists[i][j]
			r.Engine = m.name
			if opts.DryRun {
				b.learn(r.Name, m)
			} else if r.Err == nil {
				b.forget(r.Name)
			}
		}
		return err
	})
	var out []backend.SweepResult
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortStableFunc(out, func(a, c backend.SweepResult) int {
		return cmp.Or(a.Created.Compare(c.Created), cmp.Compare(a.Name, c.Name))
	})
	return out, err
}
