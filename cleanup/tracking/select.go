package tracking

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// Selector chooses the projects Plan lists and Sweep removes.
//
// Names select projects by project name, or by the name or id of one of their containers; a
// name that matches nothing selects nothing (it is already gone). Names cannot be combined with
// the other fields.
//
// Otherwise All or Stale says which projects are candidates, and Task and OlderThan narrow
// them: All is every project, detached and live ones included; Stale is only those whose owner
// process is dead (never a detached one, nor one whose owner is on another host).
type Selector struct {
	Names     []string
	All       bool
	Stale     bool
	Task      string
	OlderThan time.Duration
}

// IsZero reports whether s selects nothing at all.
func (s Selector) IsZero() bool {
	return len(s.Names) == 0 && !s.All && !s.Stale && s.Task == "" && s.OlderThan == 0
}

// Validate reports a selector that is empty, or mixes names with filters, as ErrInvalidConfig.
func (s Selector) Validate() error {
	switch {
	case len(s.Names) > 0 && (s.All || s.Stale || s.Task != "" || s.OlderThan != 0):
		return errdefs.New(errdefs.ErrInvalidConfig, "select projects: names cannot be combined with all, stale, task or older-than")
	case len(s.Names) > 0:
		return nil
	case s.OlderThan < 0:
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("select projects: negative older-than %s", s.OlderThan))
	case !s.All && !s.Stale && (s.Task != "" || s.OlderThan != 0):
		return errdefs.New(errdefs.ErrInvalidConfig, "select projects: task and older-than narrow all or stale: set one of them")
	case !s.All && !s.Stale:
		return errdefs.New(errdefs.ErrInvalidConfig, "select projects: nothing selected: give names, all or stale")
	}
	return nil
}

// Match reports whether p is selected by s's filters at time now. Names are not considered.
func (s Selector) Match(p Project, now time.Time) bool {
	if !s.All && !s.Stale {
		return false
	}
	if s.Stale && !p.Stale {
		return false
	}
	if s.Task != "" && p.Task != s.Task {
		return false
	}
	if s.OlderThan > 0 && (p.Created.IsZero() || now.Sub(p.Created) < s.OlderThan) {
		return false
	}
	return true
}

// Plan lists the projects and returns those s selects, without removing anything.
func Plan(ctx context.Context, c client.APIClient, s Selector) ([]Project, error) {
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
	var out []Project
	for _, p := range all {
		if s.Match(p, now) {
			out = append(out, p)
		}
	}
	return out, nil
}

// byName resolves project and container names against the listed projects.
func byName(ctx context.Context, c client.APIClient, all []Project, names []string) ([]Project, error) {
	index := map[string]int{}
	for i, p := range all {
		index[p.Name] = i
	}
	seen := map[string]bool{}
	var out []Project
	add := func(p Project) {
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
			add(Project{Name: project, Task: lbl[labels.LabelTask], Sample: lbl[labels.LabelSample], Owner: lbl[labels.LabelOwner], Status: StatusUnknown})
		}
	}
	return out, nil
}
