package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// Selection and the sweep are policy: they are computed here, once, over any backend's
// ListProjects, Containers and Down, so that `cleanup NAME` means the same on every backend.
// A backend only lists and removes.

// Lister is what Plan needs of a backend: its projects, and its containers to resolve a
// container's name or id to its project.
type Lister interface {
	ListProjects(ctx context.Context) ([]Project, error)
	Containers(ctx context.Context, sel []string, all bool) ([]Container, error)
}

// Remover is what Sweep needs beyond Plan: the one teardown verb.
type Remover interface {
	Lister
	Down(ctx context.Context, project string, opts DownOptions) (Removed, error)
}

// SweepFinisher is a backend with work to do once a sweep removed its projects (Docker
// removes the host firewall's rules of networks gone without their teardown finishing).
type SweepFinisher interface {
	FinishSweep(ctx context.Context) error
}

// Plan returns the projects sel selects, as ListProjects describes them, and removes nothing.
//
// A name selects the project of that name, else the project whose container has that name
// (as `ps` shows it in its CONTAINER column), else the project of the container of that id
// (or unique id prefix). A name that matches nothing selects nothing: it is already gone. A
// container name that several projects share (a service's pod is named after the service on
// Kubernetes) is refused as ErrInvalidConfig rather than taken for all of them.
//
// Over several engines, a listing that failed on one of them leaves its projects out: the
// others' are returned with the error.
func Plan(ctx context.Context, b Lister, sel Selector) ([]Project, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	all, listErr := b.ListProjects(ctx)
	if listErr != nil && len(all) == 0 {
		return nil, listErr
	}
	if len(sel.Names) == 0 {
		now := time.Now()
		var out []Project
		for _, p := range all {
			if sel.Match(p, now) {
				out = append(out, p)
			}
		}
		return out, listErr
	}
	out, err := byName(ctx, b, all, sel.Names)
	return out, errors.Join(err, listErr)
}

// byName resolves project, container names and container ids against the listed projects.
func byName(ctx context.Context, b Lister, all []Project, names []string) ([]Project, error) {
	index := map[string]int{}
	byContainer := map[string][]int{}
	for i, p := range all {
		index[p.Name] = i
		for _, c := range p.ContainerNames {
			byContainer[c] = append(byContainer[c], i)
		}
	}
	seen := map[string]bool{}
	var out []Project
	add := func(p Project) {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	var ctrs []Container
	listed := false
	for _, n := range names {
		if i, ok := index[n]; ok {
			add(all[i])
			continue
		}
		name := strings.TrimPrefix(n, "/")
		switch owners := byContainer[name]; {
		case len(owners) == 1:
			add(all[owners[0]])
			continue
		case len(owners) > 1:
			projects := make([]string, len(owners))
			for j, i := range owners {
				projects[j] = all[i].Name
			}
			return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("select %s: containers of several projects have that name (%s): give the project's name", n, strings.Join(projects, ", ")))
		}
		if !listed {
			var err error
			if ctrs, err = b.Containers(ctx, []string{labels.ManagedFilter}, true); err != nil {
				return nil, fmt.Errorf("select %s: list containers: %w", n, err)
			}
			listed = true
		}
		c, err := containerNamed(ctrs, name)
		if err != nil {
			return nil, fmt.Errorf("select %s: %w", n, err)
		}
		if c == nil {
			continue // no such project or container: nothing to remove
		}
		project := c.Labels[labels.ComposeProjectLabel]
		if project == "" {
			return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("select %s: container %s is not part of a composebox project", n, c.Name))
		}
		if i, ok := index[project]; ok {
			add(all[i])
		} else {
			// Created after the listing: remove it all the same.
			add(Project{Name: project, Task: c.Labels[labels.LabelTask], Sample: c.Labels[labels.LabelSample], Owner: c.Labels[labels.LabelOwner], Engine: c.Engine, Status: StatusUnknown})
		}
	}
	return out, nil
}

// containerNamed finds the container whose name or id is name, or whose id name is the
// unique prefix of; nil when none is.
func containerNamed(ctrs []Container, name string) (*Container, error) {
	var prefixed []int
	for i := range ctrs {
		c := &ctrs[i]
		if c.ID == name || c.Name == name {
			return c, nil
		}
		if strings.HasPrefix(c.ID, name) {
			prefixed = append(prefixed, i)
		}
	}
	switch len(prefixed) {
	case 0:
		return nil, nil
	case 1:
		return &ctrs[prefixed[0]], nil
	}
	return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("%d containers have ids starting with %s: give more of the id", len(prefixed), name))
}

// SweepParallelism bounds the projects a Sweep removes at once.
const SweepParallelism = 4

// SweepTimeout bounds the removal of one swept project.
const SweepTimeout = 2 * time.Minute

// Sweep removes every project sel selects (see Plan) with b's Down, SweepParallelism at a
// time, and says what became of each; with opts.DryRun it removes nothing. Each removal runs on
// a context detached from ctx with its own deadline: once ctx is done no further project is
// started, but those started are finished. Failures are collected into one error; what was
// already gone counts as removed, so a second Sweep of the same selection is a no-op.
func Sweep(ctx context.Context, b Remover, sel Selector, opts RemoveOptions) ([]SweepResult, error) {
	planned, planErr := Plan(ctx, b, sel)
	if planErr != nil && len(planned) == 0 {
		return nil, fmt.Errorf("cleanup: %w", planErr)
	}
	out := make([]SweepResult, len(planned))
	for i, p := range planned {
		out[i].Project = p
	}
	if opts.DryRun {
		return out, planErr
	}
	sem := make(chan struct{}, SweepParallelism)
	var wg sync.WaitGroup
	for i := range out {
		if ctx.Err() != nil {
			out[i].Err = fmt.Errorf("remove project %s: %w", out[i].Name, ctx.Err())
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SweepTimeout)
			defer cancel()
			out[i].Removed, out[i].Err = b.Down(rctx, out[i].Name, DownOptions{Grace: opts.Grace})
		}()
	}
	wg.Wait()
	errs := []error{planErr}
	for _, r := range out {
		errs = append(errs, r.Err)
	}
	if f, ok := b.(SweepFinisher); ok {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		errs = append(errs, f.FinishSweep(fctx))
		cancel()
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("cleanup: %w", err)
	}
	return out, nil
}
