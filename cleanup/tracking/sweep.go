package tracking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Sweep removes every project sel selects (see Plan), in parallel with a bound, and returns one
// result per project. Each removal runs on a context detached from ctx with its own deadline:
// once ctx is done no further project is started, but those started are finished. Failures are
// collected into one error; what was already gone counts as removed, so a second Sweep of the
// same selection is a no-op.
func Sweep(ctx context.Context, c client.APIClient, sel backend.Selector, opts cleanup.RemoveOptions) ([]backend.SweepResult, error) {
	projects, err := Plan(ctx, c, sel)
	if err != nil {
		return nil, fmt.Errorf("cleanup: %w", err)
	}
	return RemovePlanned(ctx, c, projects, opts)
}

// RemovePlanned removes listed projects (from Plan or List) as Sweep does, then the host
// firewall's rules of networks that no longer exist.
func RemovePlanned(ctx context.Context, c client.APIClient, projects []backend.Project, opts cleanup.RemoveOptions) ([]backend.SweepResult, error) {
	names := make([]string, len(projects))
	for i, p := range projects {
		names[i] = p.Name
	}
	removed, err := cleanup.RemoveProjects(ctx, c, names, opts)
	results := make([]backend.SweepResult, len(removed))
	for i, r := range removed {
		results[i] = backend.SweepResult{Project: projects[i], Removed: r.Removed, Err: r.Err}
	}
	// The host firewall's rules of networks gone without their teardown finishing go too.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, perr := cleanup.PruneHostFirewall(pctx, c); perr != nil {
		err = errors.Join(err, perr)
	}
	return results, err
}
