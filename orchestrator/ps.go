package orchestrator

import (
	"context"
	"slices"
	"strings"

	"github.com/composebox/composebox/orchestrator/backend"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
)

// ServiceStatus is one service of a project as `composebox ps` shows it.
type ServiceStatus struct {
	Service   string `json:"service"`
	Container string `json:"container"`
	Default   bool   `json:"default"`
	// State is the engine's container state: created, running, paused, restarting, removing,
	// exited or dead.
	State string `json:"state"`
	// Health is the healthcheck's verdict (starting, healthy or unhealthy), or "" for a
	// service without a healthcheck.
	Health string `json:"health"`
	// ExitCode is the main process's exit code once it has exited (0 while it runs).
	ExitCode int `json:"exit_code"`
	// OOMKilled reports a container the kernel killed for memory.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Status is the engine's human summary ("Up 3 minutes (healthy)", "Exited (137) 2s ago").
	Status string `json:"status"`
	Ports  []Port `json:"ports"`
}

// Running reports a service whose container runs and is not unhealthy.
func (s ServiceStatus) Running() bool {
	return s.State == backend.StateRunning && s.Health != backend.HealthUnhealthy
}

// Ps returns one entry per service of a project, running or not, found from labels alone (a
// sample started by any process), sorted by service name with the default service first. An
// unknown project is ErrNotFound, naming the projects whose names are near.
func (o *Orchestrator) Ps(ctx context.Context, project string) ([]ServiceStatus, error) {
	ctrs, err := o.projectContainers(ctx, project, "ps")
	if err != nil {
		return nil, err
	}
	out := make([]ServiceStatus, 0, len(ctrs))
	for _, c := range ctrs {
		s := ServiceStatus{Service: c.Labels[labels.ComposeServiceLabel], Container: c.Name,
			Default: c.Labels[labels.LabelDefaultService] == "true", State: c.State, Status: c.Status, Ports: []Port{}}
		info, err := o.backend.Inspect(ctx, c.ID)
		if err != nil {
			// Removed between the list and now: report what the list said.
			out = append(out, s)
			continue
		}
		s.State, s.ExitCode, s.OOMKilled, s.Health = info.State, info.ExitCode, info.OOMKilled, info.Health
		s.Ports = append(s.Ports, info.Ports...)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ServiceStatus) int {
		if a.Default != b.Default {
			if a.Default {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Service, b.Service)
	})
	return out, nil
}

// nearProjects is the "did you mean" hint for a project name that matches nothing.
func (o *Orchestrator) nearProjects(ctx context.Context, project string) string {
	list, err := o.backend.ListProjects(ctx)
	if err != nil {
		return ""
	}
	names := make([]string, len(list))
	for i, p := range list {
		names[i] = p.Name
	}
	return tracking.DidYouMean(project, names)
}
