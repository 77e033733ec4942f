package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// Open returns the sandboxes of a live sample started by any process (`composebox up`, say),
// found from labels alone: its services, the default one (by its label) first. A project with
// no container is ErrNotFound; one whose containers exist but none runs (killed, exited) is
// ErrUnavailable, with each container's state, exit code, OOM flag and log tail. A service
// that stopped while others run keeps its sandbox, whose calls answer ErrUnavailable the same
// way. The result is for exec and file calls; its Cleanup removes the project.
func (o *Orchestrator) Open(ctx context.Context, project string) (*Sample, error) {
	list, err := o.client.ContainerList(ctx, container.ListOptions{All: true, Filters: cleanup.ProjectFilter(project)})
	if err != nil {
		return nil, fmt.Errorf("open %s: list containers: %w", project, err)
	}
	if len(list) == 0 {
		return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("open %s: no composebox sample by that name (see `composebox ls`)", project))
	}
	if !slices.ContainsFunc(list, func(c container.Summary) bool { return c.State == container.StateRunning }) {
		return nil, o.deadSample(ctx, project, list)
	}
	s := &Sample{o: o, project: project, id: list[0].Labels[labels.LabelSample]}
	for _, c := range list {
		info, err := o.client.ContainerInspect(ctx, c.ID)
		if err != nil {
			return nil, fmt.Errorf("open %s: inspect %s: %w", project, c.ID[:12], err)
		}
		wd := info.Config.WorkingDir
		if wd == "" {
			wd = "/"
		}
		service := c.Labels[labels.ComposeServiceLabel]
		isDefault := c.Labels[labels.LabelDefaultService] == "true"
		s.sandboxes = append(s.sandboxes, o.newSandbox(project, service, c.ID, strings.TrimPrefix(info.Name, "/"), wd, info.Config.User, isDefault))
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
	if !s.sandboxes[0].isDefault && len(s.sandboxes) > 1 {
		// A sample started by something other than composebox: fall back to the contract's rule.
		for i, sb := range s.sandboxes {
			if sb.service == "default" {
				s.sandboxes[0], s.sandboxes[i] = s.sandboxes[i], s.sandboxes[0]
			}
		}
	}
	s.sandboxes[0].isDefault = true
	return s, nil
}

// deadSample is the ErrUnavailable of a sample none of whose containers runs: why, container
// by container.
func (o *Orchestrator) deadSample(ctx context.Context, project string, list []container.Summary) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	why := make([]string, 0, len(list))
	for _, c := range list {
		d, err := sandboxio.Diagnose(dctx, sandboxio.Target{Client: o.client, Container: c.ID})
		if err != nil {
			why = append(why, fmt.Sprintf("container %s: %v", c.ID[:12], err))
			continue
		}
		why = append(why, d.String())
	}
	slices.Sort(why)
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("open %s: the sample is not running (remove it with `composebox down %s`): %s",
		project, project, strings.Join(why, "; ")))
}
