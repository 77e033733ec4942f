package dockerbackend

import (
	"context"

	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/orchestrator/backend"
)

func labelFilter(sel []string) filters.Args {
	f := filters.NewArgs()
	for _, l := range sel {
		f.Add("label", l)
	}
	return f
}

// OwnedProjects is tracking.ProjectsOf, on the retrying client: a teardown rides out the
// daemon's hiccups.
func (b *Backend) OwnedProjects(ctx context.Context, task, owner string) ([]string, error) {
	return tracking.ProjectsOf(ctx, b.engine.Client(), task, owner)
}

// ListProjects is tracking.List.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	list, err := tracking.List(ctx, b.raw)
	out := make([]backend.Project, len(list))
	for i, p := range list {
		out[i] = project(p)
	}
	return out, err
}

// Sweep is tracking.Sweep on the retrying client.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	res, err := tracking.Sweep(ctx, b.engine.Client(), tracking.Selector{Names: sel.Names, All: sel.All, Stale: sel.Stale, Task: sel.Task, OlderThan: sel.OlderThan},
		cleanup.RemoveOptions{Grace: opts.Grace})
	out := make([]backend.SweepResult, len(res))
	for i, r := range res {
		out[i] = backend.SweepResult{Project: project(r.Project), Removed: removed(r.Removed), Err: r.Err}
	}
	return out, err
}

func project(p tracking.Project) backend.Project {
	return backend.Project{Name: p.Name, Task: p.Task, Sample: p.Sample, Owner: p.Owner, Stale: p.Stale, Created: p.Created}
}
