package orchestrator

import (
	"context"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Project is one composebox project as List finds it, from its resources' labels alone:
// samples of every process, live, stale and detached ones.
type Project = backend.Project

// ListOptions selects the projects List returns. The zero value lists every project whose
// owner is on this host.
type ListOptions struct {
	// Task lists only the projects of this task.
	Task string
	// All also lists projects whose owner is on another host (or unreadable).
	All bool
}

// Listing is what List found.
type Listing struct {
	Projects []Project
	// Hidden counts the projects of another host that were left out (without All).
	Hidden int
}

// List finds every composebox project on the backend, from its containers, networks and
// volumes (a project with only a leftover network is listed too), sorted by creation time.
// What only the state cache knows (the config of a project whose containers are gone) is
// filled in from it.
func (o *Orchestrator) List(ctx context.Context, opts ListOptions) (Listing, error) {
	if _, err := o.prerequisites(ctx); err != nil {
		return Listing{}, err
	}
	// Over several engines, one that does not answer leaves its projects out: the others'
	// are listed all the same, and the error names it.
	projects, err := o.backend.ListProjects(ctx)
	if err != nil && len(projects) == 0 {
		return Listing{}, o.engineLost(err)
	}
	o.fillFromCache(projects)
	out := Listing{Projects: make([]Project, 0, len(projects))}
	for _, p := range projects {
		if opts.Task != "" && p.Task != opts.Task {
			continue
		}
		if !opts.All && p.Status == backend.StatusUnknown {
			out.Hidden++
			continue
		}
		out.Projects = append(out.Projects, p)
	}
	return out, o.engineLost(err)
}

// fillFromCache adds the state cache's config to projects whose labels name none. The cache
// is optional: any failure to read it is ignored.
func (o *Orchestrator) fillFromCache(projects []Project) {
	records, err := o.cache().Samples()
	if err != nil || len(records) == 0 {
		return
	}
	byProject := map[string]tracking.SampleRecord{}
	for _, r := range records {
		byProject[r.Project] = r
	}
	for i, p := range projects {
		if r, ok := byProject[p.Name]; ok && p.Config == "" {
			projects[i].Config = r.Config
		}
	}
}
