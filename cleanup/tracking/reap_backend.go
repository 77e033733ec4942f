package tracking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// ReapDescribed is the watchdog's body on any backend: it waits until the owner process dies,
// then rebuilds the backend d describes and removes owner's projects through it (ReapBackend).
// The backend is made only once the owner has died, so that a waiting watchdog holds no
// connection.
func ReapDescribed(ctx context.Context, owner string, d backend.Description, rebuild Rebuild, opts ReapOptions) ([]backend.SweepResult, error) {
	opts = reapDefaults(opts)
	if err := WaitOwner(ctx, owner, opts.Interval); err != nil {
		return nil, err
	}
	b, err := rebuild(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("reap %s: rebuild the %s backend: %w", owner, d.Kind, err)
	}
	defer b.Close()
	return ReapBackend(ctx, b, owner, opts)
}

// ReapBackend waits until the owner process dies, then removes, through b's own verbs, every
// project whose owner is exactly owner, except those handed over as detached, and returns what
// it removed. It is Reap for any backend: the projects are found with b's ListProjects and
// removed with its Down (backend.Sweep). opts.Client and opts.Engines are not used: b is what
// is swept.
func ReapBackend(ctx context.Context, b backend.Remover, owner string, opts ReapOptions) ([]backend.SweepResult, error) {
	opts = reapDefaults(opts)
	if err := WaitOwner(ctx, owner, opts.Interval); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	return sweepUntilClean(ctx, owner, opts.StateDir, func(ctx context.Context) ([]backend.SweepResult, error) {
		return SweepOwnerOf(ctx, b, owner, opts.Remove.Grace)
	}, nil)
}

// sweepUntilClean is the reaper's loop on every backend: it runs sweep until a pass after the
// first finds nothing and fails nothing (a create request that was in flight when the owner
// died can land after the first pass), then runs done (nil: nothing) on that clean pass. A
// failed pass is retried every half second until ctx ends. The projects a pass removed go
// from stateDir too (their own directories and state cache records), as after any teardown.
func sweepUntilClean(ctx context.Context, owner, stateDir string, sweep func(context.Context) ([]backend.SweepResult, error), done func(context.Context) error) ([]backend.SweepResult, error) {
	var (
		all     []backend.SweepResult
		lastErr error
	)
	for pass := 0; ; pass++ {
		res, err := sweep(ctx)
		for _, r := range res {
			if r.Err == nil {
				if ferr := Forget(stateDir, r.Name); ferr != nil {
					err = errors.Join(err, ferr)
				}
			}
		}
		all = append(all, res...)
		lastErr = err
		if err == nil && len(res) == 0 && pass > 0 {
			if done != nil {
				err = done(ctx)
			}
			return all, err
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				return all, nil
			}
			return all, fmt.Errorf("reap %s: %w", owner, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// SweepOwnerOf removes once, through b, every project whose owner is exactly owner (a project
// another owner also holds, a claimed pool sample say, is not owner's alone) and that is not
// handed over as detached. It refuses an owner that is still alive.
func SweepOwnerOf(ctx context.Context, b backend.Remover, owner string, grace time.Duration) ([]backend.SweepResult, error) {
	if s := OwnerStatus(owner); s != backend.StatusStale {
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("sweep owner %s: owner is %s, not stale", owner, s))
	}
	projects, listErr := b.ListProjects(ctx)
	var names []string
	for _, p := range projects {
		if p.Owner == owner && p.Status == backend.StatusStale {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		if listErr != nil {
			return nil, fmt.Errorf("sweep owner %s: %w", owner, listErr)
		}
		return nil, nil
	}
	res, err := backend.Sweep(ctx, b, backend.Selector{Names: names}, backend.RemoveOptions{Grace: grace})
	if err = errors.Join(err, listErr); err != nil {
		return res, fmt.Errorf("sweep owner %s: %w", owner, err)
	}
	return res, nil
}

// reapDefaults fills ReapOptions' defaults.
func reapDefaults(opts ReapOptions) ReapOptions {
	if opts.Interval <= 0 {
		opts.Interval = 250 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	return opts
}
