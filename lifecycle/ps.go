package lifecycle

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/composebox/composebox/cleanup"
)

// Container is one container of a project, as Ps lists it.
type Container struct {
	ID      string            `json:"id"`
	Name    string            `json:"name"`
	Service string            `json:"service"`
	State   string            `json:"state"`
	Labels  map[string]string `json:"-"`
}

// Ps lists the project's containers, running or not, from labels alone.
func (e *Engine) Ps(ctx context.Context, project string) ([]Container, error) {
	list, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: cleanup.ProjectFilter(project)})
	if err != nil {
		return nil, fmt.Errorf("list containers of %s: %w", project, err)
	}
	out := make([]Container, 0, len(list))
	for _, c := range list {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Container{ID: c.ID, Name: name, Service: c.Labels[serviceLabel], State: c.State, Labels: c.Labels})
	}
	return out, nil
}
