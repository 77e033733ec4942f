package tracking

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Plan lists the projects and returns those s selects, without removing anything. Names are
// resolved here (a container's name or id selects its project); the other fields through
// s.Match.
func Plan(ctx context.Context, c client.APIClient, s backend.Selector) ([]backend.Project, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	all, err := List(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(s.Names) > 0 {
		return byName(ctx, c, all, s.Names)
	}
	now := time.Now()
	var out []backend.Project
	for _, p := range all {
		if s.Match(p, now) {
			out = append(out, p)
		}
	}
	return out, nil
}

// byName resolves project and container names against the listed projects.
func byName(ctx context.Context, c client.APIClient, all []backend.Project, names []string) ([]backend.Project, error) {
	index := map[string]int{}
	for i, p := range all {
		index[p.Name] = i
	}
	seen := map[string]bool{}
	var out []backend.Project
	add := func(p backend.Project) {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	for _, n := range names {
		if i, ok := index[n]; ok {
			add(all[i])
			continue
		}
		info, err := c.ContainerInspect(ctx, n)
		if client.IsErrNotFound(err) {
			continue // no such project or container: nothing to remove
		}
		if err != nil {
			return nil, fmt.Errorf("select %s: inspect container: %w", n, err)
		}
		var lbl map[string]string
		if info.Config != nil {
			lbl = info.Config.Labels
		}
		project := lbl[labels.ComposeProjectLabel]
		if lbl[labels.LabelManaged] != "true" || project == "" {
			return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("select %s: container %s is not part of a composebox project", n, info.Name))
		}
		if i, ok := index[project]; ok {
			add(all[i])
		} else {
			// Created after the listing: remove it all the same.
			add(backend.Project{Name: project, Task: lbl[labels.LabelTask], Sample: lbl[labels.LabelSample], Owner: lbl[labels.LabelOwner], Status: backend.StatusUnknown})
		}
	}
	return out, nil
}
