package backend_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// listing is a backend's inventory as Plan reads it: the narrow interface, faked for the
// selection's pure logic (every backend runs it for real in the harness).
type listing struct {
	projects   []backend.Project
	containers []backend.Container
}

func (l listing) ListProjects(context.Context) ([]backend.Project, error) { return l.projects, nil }
func (l listing) Containers(context.Context, []string, bool) ([]backend.Container, error) {
	return l.containers, nil
}

func names(ps []backend.Project) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func TestPlanResolvesProjectsContainersAndIDs(t *testing.T) {
	now := time.Now()
	l := listing{
		projects: []backend.Project{
			{Name: "a", Task: "t1", Stale: true, Status: backend.StatusStale, Created: now.Add(-time.Hour), ContainerNames: []string{"a-web-1"}},
			{Name: "b", Task: "t2", Status: backend.StatusAlive, Created: now, ContainerNames: []string{"default"}},
			{Name: "c", Task: "t2", Status: backend.StatusDetached, Created: now, ContainerNames: []string{"default", "c-db"}},
		},
		containers: []backend.Container{
			{ID: "ns-a/web", Name: "a-web-1", Labels: map[string]string{labels.ComposeProjectLabel: "a"}},
			{ID: "0123abcd", Name: "late", Labels: map[string]string{labels.ComposeProjectLabel: "d", labels.LabelTask: "t3"}},
			{ID: "9999", Name: "stray", Labels: map[string]string{}},
		},
	}
	cases := []struct {
		sel  backend.Selector
		want []string
	}{
		{backend.Selector{Names: []string{"b"}}, []string{"b"}},
		{backend.Selector{Names: []string{"a-web-1", "/c-db", "a"}}, []string{"a", "c"}},
		{backend.Selector{Names: []string{"ns-a/web"}}, []string{"a"}},
		{backend.Selector{Names: []string{"0123"}}, []string{"d"}}, // created after the listing
		{backend.Selector{Names: []string{"gone"}}, nil},
		{backend.Selector{All: true}, []string{"a", "b", "c"}},
		{backend.Selector{Stale: true}, []string{"a"}},
		{backend.Selector{All: true, Task: "t2"}, []string{"b", "c"}},
		{backend.Selector{All: true, OlderThan: 30 * time.Minute}, []string{"a"}},
	}
	for _, tc := range cases {
		got, err := backend.Plan(t.Context(), l, tc.sel)
		if err != nil || !slices.Equal(names(got), tc.want) {
			t.Errorf("Plan(%+v) = %v, %v; want %v", tc.sel, names(got), err, tc.want)
		}
	}
	// A container name two projects share selects neither: it is refused.
	if _, err := backend.Plan(t.Context(), l, backend.Selector{Names: []string{"default"}}); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("ambiguous container name: %v, want invalid config", err)
	}
	// A container outside every composebox project is not a project to remove.
	if _, err := backend.Plan(t.Context(), l, backend.Selector{Names: []string{"stray"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stray container: %v, want not found", err)
	}
	if _, err := backend.Plan(t.Context(), l, backend.Selector{}); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("empty selector: %v, want invalid config", err)
	}
}
