package multiengine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Routing: a project is on the engine Place chose, or on the one a listing found it on; a
// container on the one it was listed or started on. What this process has not seen is looked
// for on every engine.

// wrap names m in an error of its engine, and marks the engine down when the error says it
// could not be reached.
func (m *member) wrap(err error) error {
	if err == nil {
		m.answered()
		return nil
	}
	m.failed(err)
	var ee *backend.EngineError
	if errors.As(err, &ee) {
		return err
	}
	return &backend.EngineError{Engine: m.name, Err: err}
}

// wrapLost is wrap for sandbox I/O, whose errors keep their own words unless the engine is
// gone: an exec's timeout reads the same on any engine, a lost engine is named.
func (m *member) wrapLost(err error) error {
	if err == nil {
		return nil
	}
	if backend.Unreachable(m.b, err) || errors.Is(err, errdefs.ErrUnavailable) {
		return m.wrap(err)
	}
	return err
}

// learn records that project lives on m.
func (b *Backend) learn(project string, m *member) {
	if project == "" {
		return
	}
	b.mu.Lock()
	if b.projects[project] == nil {
		b.projects[project] = m
	}
	b.mu.Unlock()
}

// learnContainer records that a container (by its id and name) of project lives on m.
func (b *Backend) learnContainer(project string, m *member, keys ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if project != "" && b.projects[project] == nil {
		b.projects[project] = m
	}
	for _, k := range keys {
		if k == "" {
			continue
		}
		if _, ok := b.containers[k]; !ok {
			b.containers[k] = m
			b.byProject[project] = append(b.byProject[project], k)
		}
	}
}

// forget drops a removed project and its containers.
func (b *Backend) forget(project string) {
	b.mu.Lock()
	m := b.projects[project]
	delete(b.projects, project)
	for _, k := range b.byProject[project] {
		delete(b.containers, k)
	}
	delete(b.byProject, project)
	b.mu.Unlock()
	if m != nil {
		m.gone(project)
	}
	for _, mm := range b.members {
		mm.gone(project)
	}
}

// placed returns the engine of a project this process knows of: (nil, true) for one placed
// nowhere, (nil, false) for one it does not know.
func (b *Backend) placed(project string) (*member, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.projects[project]
	return m, ok
}

// projectMember finds the engine of project: the one it is known on, else the one whose
// containers or markers carry its label. A project on no engine is ErrNotFound (ErrUnavailable
// naming the engines that did not answer, when some did not).
func (b *Backend) projectMember(ctx context.Context, project string) (*member, error) {
	if m, ok := b.placed(project); ok && m != nil {
		return m, nil
	}
	found := make([]bool, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		list, err := m.b.Containers(ctx, labels.ProjectSelector(project), true)
		if err != nil {
			return err
		}
		found[i] = len(list) > 0
		for _, c := range list {
			b.learnContainer(project, m, c.ID, c.Name)
		}
		return nil
	})
	for i, f := range found {
		if f {
			return b.members[i], nil
		}
	}
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrUnavailable, err, fmt.Sprintf("find project %s", project))
	}
	return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("project %s: on no engine", project))
}

// containerMember finds the engine of a container (by id or name): the one it was seen on,
// else the one that knows it.
func (b *Backend) containerMember(ctx context.Context, id string) (*member, error) {
	b.mu.Lock()
	m := b.containers[id]
	b.mu.Unlock()
	if m != nil {
		return m, nil
	}
	found := make([]bool, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		_, err := m.b.Inspect(ctx, id)
		if errdefs.Kind(err) == "not_found" {
			return nil
		}
		found[i] = err == nil
		return err
	})
	for i, f := range found {
		if f {
			b.mu.Lock()
			if b.containers[id] == nil {
				b.containers[id] = b.members[i]
			}
			b.mu.Unlock()
			return b.members[i], nil
		}
	}
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrUnavailable, err, "container "+id)
	}
	return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("container %s: on no engine", id))
}

// each runs fn on every engine at once, and joins the engines' errors, each naming its engine.
// An engine found down a moment ago is not asked: its error is that it is down.
func (b *Backend) each(ctx context.Context, fn func(ctx context.Context, i int, m *member) error) error {
	errs := make([]error, len(b.members))
	var wg sync.WaitGroup
	for i, m := range b.members {
		if err := m.ready(ctx); err != nil {
			errs[i] = &backend.EngineError{Engine: m.name, Err: err}
			continue
		}
		wg.Go(func() { errs[i] = m.wrap(fn(ctx, i, m)) })
	}
	wg.Wait()
	var out *multierror.Error
	for _, err := range errs {
		if err != nil {
			out = multierror.Append(out, err)
		}
	}
	if out == nil {
		return nil
	}
	if len(out.Errors) == 1 {
		return out.Errors[0]
	}
	out.ErrorFormat = joinErrors
	return out
}

// joinErrors formats several engines' errors on one line.
func joinErrors(errs []error) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// selectedProject is the project a label selector names, if it names one.
func selectedProject(sel []string) string {
	for _, s := range sel {
		if p, ok := strings.CutPrefix(s, labels.ComposeProjectLabel+"="); ok {
			return p
		}
	}
	return ""
}
