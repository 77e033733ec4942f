package tracking

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// ReapOptions tunes Reap. The zero value is the default.
type ReapOptions struct {
	// Interval is how often the owner is checked (default 250 ms).
	Interval time.Duration
	// Timeout bounds the sweep after the owner died, retries included (default 1 min).
	Timeout time.Duration
	// Client is the engine to clean up. Default: one connected from the environment once the
	// owner has died, so that a reaper holds no connection while it waits.
	Client client.APIClient
	// Engines, when given, are the engines to clean up instead (samples spread over several),
	// each connected once the owner has died and swept on its own.
	Engines []engine.Endpoint
	// Remove tunes the removals.
	Remove cleanup.RemoveOptions
	// StateDir is the state directory whose per-sample directories (SampleDir) go with their
	// projects (default DefaultStateDir(), which the watchdog inherits from its owner).
	StateDir string
}

// Reap is the watchdog's body: it waits until the owner process dies, then removes every
// project whose owner label is exactly owner, except those handed over as detached, and
// returns what it removed. It never touches a project of a live owner or of another owner. It
// returns an error at once when owner cannot be watched from this host.
func Reap(ctx context.Context, owner string, opts ReapOptions) ([]backend.SweepResult, error) {
	opts = reapDefaults(opts)
	if err := WaitOwner(ctx, owner, opts.Interval); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if len(opts.Engines) == 0 {
		return reapOn(ctx, nil, opts.Client, owner, opts)
	}
	// Every engine at once: one that does not answer does not hold the others' sweeps back.
	results := make([][]backend.SweepResult, len(opts.Engines))
	errs := make([]error, len(opts.Engines))
	var wg sync.WaitGroup
	for i, ep := range opts.Engines {
		wg.Go(func() { results[i], errs[i] = reapOn(ctx, &ep, nil, owner, opts) })
	}
	wg.Wait()
	var all []backend.SweepResult
	for _, r := range results {
		all = append(all, r...)
	}
	return all, errors.Join(errs...)
}

// reapOn sweeps one engine for owner's projects: c, else a client of ep, else one connected
// from the environment.
func reapOn(ctx context.Context, ep *engine.Endpoint, c client.APIClient, owner string, opts ReapOptions) ([]backend.SweepResult, error) {
	if c == nil {
		var err error
		c, err = connect(ctx, ep)
		if err != nil {
			return nil, fmt.Errorf("reap %s: %w", owner, err)
		}
		defer c.Close()
	}
	return sweepUntilClean(ctx, owner, opts.StateDir, func(ctx context.Context) ([]backend.SweepResult, error) {
		return SweepOwner(ctx, c, owner, opts.Remove)
	}, func(ctx context.Context) error {
		_, err := cleanup.PruneHostFirewall(ctx, c)
		return err
	})
}

// WaitOwner blocks until the owner process is no longer alive, polling every interval. An
// owner that cannot be checked from this host (another host, a malformed label) is an error.
func WaitOwner(ctx context.Context, owner string, interval time.Duration) error {
	if s := OwnerStatus(owner); s == backend.StatusUnknown || s == backend.StatusDetached {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("watch owner %s: not a process of this host", owner))
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for OwnerStatus(owner) == backend.StatusAlive {
		select {
		case <-ctx.Done():
			return fmt.Errorf("watch owner %s: %w", owner, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// SweepOwner removes, once, every project all of whose resources carry exactly owner's label,
// except those handed over as detached. It refuses an owner that is still alive.
func SweepOwner(ctx context.Context, c client.APIClient, owner string, opts cleanup.RemoveOptions) ([]backend.SweepResult, error) {
	if s := OwnerStatus(owner); s != backend.StatusStale {
		return nil, errdefs.New(errdefs.ErrConflict, fmt.Sprintf("sweep owner %s: owner is %s, not stale", owner, s))
	}
	found, err := list(ctx, c, filters.NewArgs(filters.Arg("label", labels.ManagedFilter), filters.Arg("label", labels.LabelOwner+"="+owner)), owner)
	if err != nil {
		return nil, fmt.Errorf("sweep owner %s: %w", owner, err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	// The owner filter hides the detach markers and any other owner's resources: look at the
	// whole of each candidate.
	everything, err := listAll(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("sweep owner %s: %w", owner, err)
	}
	whole := map[string]listed{}
	for _, l := range everything {
		whole[l.Name] = l
	}
	var doomed []backend.Project
	for _, l := range found {
		w, ok := whole[l.Name]
		if !ok {
			w = l // gone between the two listings: removing it again is harmless
		}
		if w.Status == backend.StatusDetached || !w.ownedOnlyBy(owner) {
			continue
		}
		doomed = append(doomed, w.Project)
	}
	return RemovePlanned(ctx, c, doomed, opts)
}

// connect reaches the engine (ep's, else the environment's), retrying while the daemon does
// not answer (it may be restarting) until ctx is done.
func connect(ctx context.Context, ep *engine.Endpoint) (client.APIClient, error) {
	for {
		c, err := dial(ctx, ep)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errdefs.ErrPrerequisite) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// dial is engine.Connect, to ep when given.
func dial(ctx context.Context, ep *engine.Endpoint) (client.APIClient, error) {
	if ep == nil {
		c, _, err := engine.Connect(ctx, 0)
		return c, err
	}
	c, err := ep.Client()
	if err != nil {
		return nil, err
	}
	if _, err := engine.Ping(ctx, c, 0); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}
