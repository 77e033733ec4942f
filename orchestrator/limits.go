package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Limits bounds how many operations of each class the orchestrator runs at once, so that a burst
// of samples queues inside composebox instead of piling onto the daemon. A zero field takes its
// default. With C the CPUs this process may use (runtime.NumCPU, capped by a cgroup v1 or v2
// CPU quota), the defaults are:
//
//   - Builds: C. A classic build keeps about one core busy; more at once only slows each down.
//   - Starts: 2 × C. A start spends most of its time waiting on the daemon (creating containers
//     and networks, readiness probes), so twice the cores keeps the daemon busy without queueing
//     inside it.
//   - Teardowns: 2 × C, for the same reason: removal is mostly waiting for stops and unmounts.
//   - Execs: unbounded. An exec is cheap for the daemon, and a caller's own concurrency is the
//     natural bound; set one to protect a small daemon from a runaway harness.
type Limits struct {
	// Builds bounds image builds across all tasks. Callers that need the same tag always share
	// one build, whatever this says.
	Builds int
	// Starts bounds SampleInits in their create, start and readiness phase. A burst does not
	// get all of them at once: it starts 2 at a time, widening by one for every sample that
	// comes up, up to Starts, and halving when the daemon fails transiently (TCP's slow start,
	// in short), so that 200 SampleInits at once do not stampede it.
	Starts int
	// Teardowns bounds sample removals (Sample.Cleanup, Task.Cleanup). Waiting for a teardown
	// slot does not end when the caller's ctx does: teardown runs detached, with its own
	// deadline.
	Teardowns int
	// Execs bounds exec and file calls (Exec, ExecStream, ReadFile, WriteFile and their
	// streaming forms) across every sandbox of the orchestrator. Zero means unbounded.
	Execs int

	// ContainerMemory is the memory limit in bytes of every container whose compose file sets
	// none (mem_limit or deploy.resources.limits.memory) and whose policy gives none
	// (compose.Policy.Memory). Zero: a quarter of the engine host's memory. Negative: no limit.
	// A memory hog in one sample is then killed by the kernel inside its own cgroup instead of
	// pushing every other sample, and the runner, out of memory.
	ContainerMemory int64
	// ContainerPids is the pids limit of every container whose compose file sets none
	// (pids_limit or deploy.resources.limits.pids) and whose policy gives none
	// (compose.Policy.Pids). Zero: DefaultContainerPids. Negative: no limit. A fork bomb then
	// exhausts its own container's pids, not the host's.
	ContainerPids int64
}

// DefaultContainerPids is the pids limit of a container that sets none (Limits.ContainerPids).
const DefaultContainerPids = 4096

// memoryShare divides the engine host's memory into the default memory limit of a container
// (Limits.ContainerMemory).
const memoryShare = 4

// minContainerMemory is the engine's smallest memory limit.
const minContainerMemory = 6 << 20

// rampStart is how many starts a burst begins with.
const rampStart = 2

// DefaultLimits are the limits for cpus CPUs (see Limits).
func DefaultLimits(cpus int) Limits {
	cpus = max(cpus, 1)
	return Limits{Builds: cpus, Starts: 2 * cpus, Teardowns: 2 * cpus}
}

// orDefaults fills l's zero fields from DefaultLimits(cpus).
func (l Limits) orDefaults(cpus int) Limits {
	d := DefaultLimits(cpus)
	if l.Builds == 0 {
		l.Builds = d.Builds
	}
	if l.Starts == 0 {
		l.Starts = d.Starts
	}
	if l.Teardowns == 0 {
		l.Teardowns = d.Teardowns
	}
	return l
}

// WithLimits sets the concurrency limits. Each non-zero field replaces that limit; a zero field
// keeps the default (or what an earlier option set), so WithLimits(Limits{Execs: 32}) bounds
// execs alone.
func WithLimits(l Limits) Option {
	return func(c *config) error {
		for _, f := range []struct {
			name string
			v    int
			dst  *int
		}{
			{"builds", l.Builds, &c.limits.Builds},
			{"starts", l.Starts, &c.limits.Starts},
			{"teardowns", l.Teardowns, &c.limits.Teardowns},
			{"execs", l.Execs, &c.limits.Execs},
		} {
			if f.v < 0 {
				return fmt.Errorf("limits: %s %d: must not be negative", f.name, f.v)
			}
			if f.v > 0 {
				*f.dst = f.v
			}
		}
		if l.ContainerMemory > 0 && l.ContainerMemory < minContainerMemory {
			return fmt.Errorf("limits: container memory %d bytes: the engine's minimum is %d (6 MiB); negative means no limit", l.ContainerMemory, minContainerMemory)
		}
		if l.ContainerMemory != 0 {
			c.limits.ContainerMemory = l.ContainerMemory
		}
		if l.ContainerPids != 0 {
			c.limits.ContainerPids = l.ContainerPids
		}
		return nil
	}
}

// containerDefaults is p with the limits a container gets when neither its file nor p sets
// one: Limits.ContainerMemory (a share of memTotal, the engine host's memory, by default) and
// Limits.ContainerPids.
func (o *Orchestrator) containerDefaults(p compose.Policy, memTotal int64) compose.Policy {
	if p.Pids == 0 {
		switch l := o.limits.ContainerPids; {
		case l > 0:
			p.Pids = l
		case l == 0:
			p.Pids = DefaultContainerPids
		}
	}
	if p.Memory == 0 {
		switch l := o.limits.ContainerMemory; {
		case l > 0:
			p.Memory = l
		case l == 0 && memTotal > 0:
			p.Memory = max(memTotal/memoryShare, minContainerMemory)
		}
	}
	return p
}

// Limits are the concurrency limits in force, defaults filled in (Execs zero: unbounded).
func (o *Orchestrator) Limits() Limits { return o.limits }

// initLimits makes one gate per class of operation.
func (o *Orchestrator) initLimits(l Limits) {
	o.limits = l
	o.builds = newGate("build", l.Builds, false)
	o.starts = newGate("start", l.Starts, true)
	o.teardowns = newGate("teardown", l.Teardowns, false)
	o.execs = newGate("exec", l.Execs, false)
}

// onRetry makes every retried engine call narrow the start ramp: a daemon that resets
// connections or answers 503 is overloaded, and more concurrent starts would make it worse.
func (o *Orchestrator) onRetry(string, error) { o.starts.congested() }

// buildLimit is lifecycle.BuildOptions.Limit for the builds gate.
func (o *Orchestrator) buildLimit(ctx context.Context) (func(), error) {
	s, err := o.builds.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return func() { s.release(neutral) }, nil
}

// execSlot waits for an exec slot when execs are bounded; op and the service name a cancelled
// wait in its error.
func (b *Sandbox) execSlot(ctx context.Context, op, path string) (release func(), err error) {
	if b.execs == nil {
		// Unbounded, the default: nothing to take on the exec hot path.
		return noRelease, nil
	}
	s, err := b.execs.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", strings.TrimSpace(op+" "+path), b.service, err)
	}
	return func() { s.release(neutral) }, nil
}

func noRelease() {}

// outcome is how an operation that held a slot ended, which steers a ramping gate.
type outcome int

const (
	// neutral neither widens nor narrows: the operation failed for a reason of its own (a
	// sample that never became ready, a bad config) or is not ramped.
	neutral outcome = iota
	// succeeded widens a ramping gate by one.
	succeeded
	// transient (the daemon failed transiently) halves a ramping gate.
	transient
)

// outcomeOf classifies an operation's error for its gate, by the backend's word on which
// errors are transient.
func (o *Orchestrator) outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return succeeded
	case backend.Transient(o.backend, err):
		return transient
	default:
		return neutral
	}
}

// gate bounds how many operations of one class run at once. A fixed gate admits up to limit. A
// ramping gate admits up to a width that starts at rampStart, grows by one with every success
// up to limit, and halves on a transient daemon error; only one cut per round counts, so that
// the errors of operations admitted before a cut do not cut again (else a single hiccup seen by
// every operation in flight would collapse the width to one). Waiters are served in arrival
// order. A nil *gate is unbounded: it admits everything at no cost.
type gate struct {
	class string
	limit int
	ramp  bool

	mu       sync.Mutex
	width    int
	inflight int
	// epoch counts cuts; a slot remembers the epoch it was granted in.
	epoch uint64
	// grantsSinceCut tells a congestion signal whether any operation started since the last
	// cut, i.e. whether the signal is news.
	grantsSinceCut int
	queue          []*waiter
	// idle, when not nil, is closed once the gate has room that no waiter wants (see
	// acquireIdle).
	idle chan struct{}
}

type waiter struct {
	ready chan struct{}
	// slot is set, under the gate's lock, when the waiter is granted.
	slot *slot
}

// slot is one admitted operation. release ends it; only the first release counts.
type slot struct {
	g        *gate
	epoch    uint64
	released atomic.Bool
}

// newGate returns a gate for limit operations at once, nil (unbounded) when limit <= 0.
func newGate(class string, limit int, ramp bool) *gate {
	if limit <= 0 {
		return nil
	}
	width := limit
	if ramp {
		width = min(rampStart, limit)
	}
	return &gate{class: class, limit: limit, ramp: ramp, width: width}
}

// acquire waits for a slot, in arrival order, until ctx ends. A nil gate returns a nil slot at
// once, whose release does nothing.
func (g *gate) acquire(ctx context.Context) (*slot, error) {
	if g == nil {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, g.waitErr(err)
	}
	g.mu.Lock()
	if len(g.queue) == 0 && g.inflight < g.width {
		s := g.grantLocked()
		g.mu.Unlock()
		return s, nil
	}
	w := &waiter{ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return w.slot, nil
	case <-ctx.Done():
		g.mu.Lock()
		granted := w.slot
		if granted == nil {
			g.queue = slices.DeleteFunc(g.queue, func(x *waiter) bool { return x == w })
		}
		g.mu.Unlock()
		// Granted just as ctx ended: hand the slot on rather than keep what the caller no
		// longer wants.
		granted.release(neutral)
		return nil, g.waitErr(ctx.Err())
	}
}

func (g *gate) waitErr(err error) error {
	article := "a"
	if strings.ContainsRune("aeiou", rune(g.class[0])) {
		article = "an"
	}
	return fmt.Errorf("wait for %s %s slot: %w", article, g.class, err)
}

func (g *gate) grantLocked() *slot {
	g.inflight++
	g.grantsSinceCut++
	return &slot{g: g, epoch: g.epoch}
}

// release ends the slot's operation with outcome o and admits whoever the gate now has room
// for.
func (s *slot) release(o outcome) {
	if s == nil || !s.released.CompareAndSwap(false, true) {
		return
	}
	g := s.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	switch o {
	case succeeded:
		if g.ramp && g.width < g.limit {
			g.width++
		}
	case transient:
		if s.epoch == g.epoch {
			g.cutLocked()
		}
	}
	g.dispatchLocked()
}

// congested is a transient daemon error seen outside any one slot's outcome (a retried engine
// call). It halves a ramping gate, unless nothing was admitted since the last cut.
func (g *gate) congested() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.grantsSinceCut > 0 {
		g.cutLocked()
	}
}

func (g *gate) cutLocked() {
	if !g.ramp {
		return
	}
	g.width = max(1, g.width/2)
	g.epoch++
	g.grantsSinceCut = 0
}

func (g *gate) dispatchLocked() {
	for len(g.queue) > 0 && g.inflight < g.width {
		w := g.queue[0]
		g.queue = g.queue[1:]
		w.slot = g.grantLocked()
		close(w.ready)
	}
	if g.idle != nil && g.hasIdleLocked() {
		close(g.idle)
		g.idle = nil
	}
}

// stats is the gate's state, for tests.
func (g *gate) stats() (width, inflight, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.width, g.inflight, len(g.queue)
}

// acquireIdle waits until the gate has room that no waiter wants, keeping one slot spare for
// an acquire that may come next (when the gate is wider than one), and takes it: what a
// background refill may use without delaying anyone. Arrivals overtake it. A nil gate grants
// at once.
func (g *gate) acquireIdle(ctx context.Context) (*slot, error) {
	if g == nil {
		return nil, nil
	}
	for {
		g.mu.Lock()
		if g.hasIdleLocked() {
			s := g.grantLocked()
			g.mu.Unlock()
			return s, nil
		}
		if g.idle == nil {
			g.idle = make(chan struct{})
		}
		idle := g.idle
		g.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return nil, g.waitErr(ctx.Err())
		}
	}
}

// hasIdleLocked reports room for acquireIdle: nobody waiting, and a free slot beyond the one
// kept spare.
func (g *gate) hasIdleLocked() bool {
	room := g.width
	if room > 1 {
		room--
	}
	return len(g.queue) == 0 && g.inflight < room
}
