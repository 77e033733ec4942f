package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// CleanupOptions bound a teardown (Task.Cleanup, Sample.Cleanup, Session.Cleanup). The zero
// value is the default.
type CleanupOptions struct {
	// Timeout bounds the whole teardown (default: 2 minutes). The teardown runs on a context
	// of its own with this deadline: cancelling the caller's ctx never abandons it half-way.
	// A teardown that did not finish in time fails, and the next Cleanup call retries it.
	Timeout time.Duration
}

// teardownTimeout bounds a teardown that runs after its caller gave up.
const teardownTimeout = 2 * time.Minute

// teardownContext is the context a teardown runs on: detached from ctx's cancellation (a
// Ctrl-C must not leave half a project behind), bounded by its own deadline.
func teardownContext(ctx context.Context, opts ...CleanupOptions) (context.Context, context.CancelFunc) {
	timeout := teardownTimeout
	for _, o := range opts {
		if o.Timeout > 0 {
			timeout = o.Timeout
		}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// calls are the exec and file calls in flight on one sample's sandboxes, so that the
// sample's cleanup can stop them rather than leave them to fail one by one as the containers
// go. Once closed, no new call starts.
type calls struct {
	mu     sync.Mutex
	next   uint64
	live   map[uint64]context.CancelFunc
	wg     sync.WaitGroup
	closed bool
}

func newCalls() *calls { return &calls{live: map[uint64]context.CancelFunc{}} }

// enter registers a call made on ctx: the returned context is cancelled when the sample is
// cleaned up, and done must be called when the call has ended.
func (c *calls) enter(ctx context.Context, op, project string) (context.Context, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s in %s: the sample is cleaned up", op, project))
	}
	cctx, cancel := context.WithCancel(ctx)
	id := c.next
	c.next++
	c.live[id] = cancel
	c.wg.Add(1)
	var once sync.Once
	done := func() {
		once.Do(func() {
			cancel()
			c.mu.Lock()
			delete(c.live, id)
			c.mu.Unlock()
			c.wg.Done()
		})
	}
	return cctx, done, nil
}

// stop refuses new calls, cancels those in flight (which kills their commands inside the
// container) and waits for them to end, or for ctx to.
func (c *calls) stop(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	for _, cancel := range c.live {
		cancel()
	}
	c.mu.Unlock()
	ended := make(chan struct{})
	go func() { c.wg.Wait(); close(ended) }()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop the running commands: %w", ctx.Err())
	}
}

// down is the one teardown of a project, whoever asks for it (Sample.Cleanup, Task.Cleanup,
// a discarded warm sample, Remove): the backend's Down, within the teardown limit, and then
// what this host keeps of the sample (forget). It runs on ctx as given: callers pass a
// teardown context.
func (o *Orchestrator) down(ctx context.Context, project string) (backend.Removed, error) {
	slot, err := o.teardowns.acquire(ctx)
	if err != nil {
		return backend.Removed{}, fmt.Errorf("remove project %s: %w", project, err)
	}
	removed, err := o.backend.Down(ctx, project, backend.DownOptions{})
	slot.release(neutral)
	if err != nil {
		return removed, err
	}
	return removed, o.forget(project)
}

// sweep is down for every project sel selects, as backend.Sweep selects them (the one
// selection every backend shares; it bounds its own parallelism); each project it removed is forgotten as down forgets it.
func (o *Orchestrator) sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	res, err := backend.Sweep(ctx, o.backend, sel, opts)
	if opts.DryRun {
		return res, err
	}
	for i, r := range res {
		if r.Err == nil {
			res[i].Err = o.forget(r.Name)
		}
	}
	return res, err
}

// forget drops what this host keeps of a removed project: its directory under the state dir
// and its state cache record (tracking.Forget, which the reaper uses too).
func (o *Orchestrator) forget(project string) error {
	return tracking.Forget(o.cfg.stateDir, project)
}
