package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// RemoveOptions configures Remove. The zero value is the default, and the only setting today:
// the sandbox's 1 s stop grace.
type RemoveOptions struct {
	// Timeout bounds the whole removal (default: 2 minutes), which runs on a context of its
	// own, as every teardown does.
	Timeout time.Duration
}

// RemoveResult is what Remove did to one project.
type RemoveResult struct {
	Project string
	Removed backend.Removed
	Err     error
}

// Remove removes the named projects, of any process, as a sample's own Cleanup does: their
// containers, networks and volumes found by labels alone, their directories under the state
// dir and their state cache records. A name that is no project is an ErrNotFound naming the
// projects whose names are near; the other projects are still removed. It returns a result
// per project removed (or whose removal failed), in the order given, and the first error.
func (o *Orchestrator) Remove(ctx context.Context, projects []string, opts RemoveOptions) ([]RemoveResult, error) {
	// Teardown: all of it, the listing included, works after ctx is cancelled (a test's or a
	// signal handler's cleanup), bounded by the timeout.
	dctx, cancel := teardownContext(ctx, CleanupOptions{Timeout: opts.Timeout})
	defer cancel()
	if _, err := o.prerequisites(dctx); err != nil {
		return nil, err
	}
	listed, err := o.backend.ListProjects(dctx)
	if err != nil {
		return nil, o.engineLost(err)
	}
	names := make([]string, len(listed))
	for i, p := range listed {
		names[i] = p.Name
	}
	results := []RemoveResult{}
	var firstErr error
	for _, p := range projects {
		if !slices.Contains(names, p) {
			if firstErr == nil {
				firstErr = errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("down %s: no composebox project by that name%s (see `composebox ls`)", p, tracking.DidYouMean(p, names)))
			}
			continue
		}
		removed, err := o.down(dctx, p)
		err = o.engineLost(err)
		results = append(results, RemoveResult{Project: p, Removed: removed, Err: err})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return results, firstErr
}
