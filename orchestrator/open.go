package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Open returns the sandboxes of a live sample started by any process (`composebox up`, say),
// found from labels alone: its running services, the default one first. The default service
// is the one composebox marked with its label when the sample started; for a project started
// otherwise, the service named "default", else the first by name.
//
// A project with no container at all is ErrNotFound. One whose containers exist but whose
// default service does not run (it was killed, crashed or stopped) is ErrUnavailable, with
// each stopped container's state, exit code, OOM flag and log tail. The result is for exec
// and file calls; its Cleanup removes the project.
func (o *Orchestrator) Open(ctx context.Context, project string) (*Sample, error) {
	list, err := o.backend.Containers(ctx, labels.ProjectSelector(project), true)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrUnavailable, err, fmt.Sprintf("open %s: list containers", project))
	}
	if len(list) == 0 {
		return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("open %s: no composebox sample by that name%s (see `composebox ls`)", project, o.nearProjects(ctx, project)))
	}
	s := &Sample{o: o, project: project, id: list[0].Labels[labels.LabelSample], engine: list[0].Engine, calls: newCalls()}
	// The default service by its label, whether its container runs or not: a dead default
	// makes the sample unavailable, never another service its default.
	defaultService := ""
	for _, c := range list {
		if c.Labels[labels.LabelDefaultService] == "true" {
			defaultService = c.Labels[labels.ComposeServiceLabel]
		}
	}
	// The running containers are inspected at once: each inspect is a round trip to the engine,
	// and a CLI verb on a live sample (exec, cp) waits for them all before it starts.
	infos := make([]backend.ContainerInfo, len(list))
	var g errgroup.Group
	for i, c := range list {
		if c.State == "running" {
			g.Go(func() (err error) {
				infos[i], err = o.backend.Inspect(ctx, c.ID)
				if err != nil {
					return errdefs.Wrap(errdefs.ErrUnavailable, err, fmt.Sprintf("open %s: inspect %s", project, c.ID[:min(12, len(c.ID))]))
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var dead []string
	for i, c := range list {
		service := c.Labels[labels.ComposeServiceLabel]
		if c.State != "running" {
			d, derr := backend.Diagnose(ctx, o.backend, backend.Target{Container: c.ID, Service: service})
			if derr != nil {
				d = backend.Diagnosis{Container: c.ID, Name: c.Name, Status: c.State, LogTail: "(diagnosis failed: " + derr.Error() + ")"}
			}
			s.markStopped(service, d)
			dead = append(dead, service+": "+d.String())
			continue
		}
		info := infos[i]
		if !info.Running {
			d, _ := backend.Diagnose(ctx, o.backend, backend.Target{Container: c.ID, Service: service})
			s.markStopped(service, d)
			dead = append(dead, service+": "+d.String())
			continue
		}
		s.sandboxes = append(s.sandboxes, o.newSandbox(s, service, c.ID, info.Name, info.WorkingDir, info.User, service == defaultService))
	}
	slices.Sort(dead)
	if defaultService != "" {
		if st, ok := s.stopped[defaultService]; ok {
			return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("open %s: default service %s is not running: %s", project, defaultService, st.diagnosis))
		}
	}
	if len(s.sandboxes) == 0 {
		return nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("open %s: no service is running: %s", project, strings.Join(dead, "; ")))
	}
	if defaultService == "" {
		// A sample started by something other than composebox: the service named "default",
		// else the first by name.
		defaultService = slices.MinFunc(s.sandboxes, func(a, b *Sandbox) int { return strings.Compare(a.service, b.service) }).service
		for _, sb := range s.sandboxes {
			if sb.service == "default" {
				defaultService = sb.service
			}
		}
		for _, sb := range s.sandboxes {
			sb.isDefault = sb.service == defaultService
		}
	}
	slices.SortFunc(s.sandboxes, func(a, b *Sandbox) int {
		if a.isDefault != b.isDefault {
			if a.isDefault {
				return -1
			}
			return 1
		}
		return strings.Compare(a.service, b.service)
	})
	return s, nil
}
