package orchestrator

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Warm pools. A task may keep n ready samples nobody asked for yet; SampleInit takes one when
// one is ready, and starts a cold one otherwise. A pooled sample is started by the very code
// a cold SampleInit runs (same project, same readiness checks), with one more label, and
// nothing is run in it before it is taken. Refills use only start capacity that no SampleInit
// is waiting for, under the same start limit and ramp, and back off on errors. The pool's
// state is visible to any process through marker volumes (see tracking.MarkWarm).
//
// Taking from a pool that is not shared costs no daemon round trip: the pool's own lock makes
// the take exclusive, the engine's event stream tells which waiting samples died (a take checks
// with one listing while that stream is down; a refill checks with one before its sample joins),
// and the markers are written after SampleInit returned. A shared pool can be taken from by other processes, so every take first wins the
// atomic claim in the daemon.

const (
	// EventPoolRefused: the task cannot be pooled; Message says why. Its samples start cold.
	EventPoolRefused EventKind = "pool_refused"
	// EventPoolWarm: a pooled sample is ready and in the pool, where SampleInit can take it
	// (until it is taken, dies, or the pool ends or is lowered). It comes before the sample's
	// pool_taken.
	EventPoolWarm EventKind = "pool_warm"
	// EventPoolTaken: SampleInit took a sample from the pool (Duration: how long it took).
	EventPoolTaken EventKind = "pool_taken"
	// EventPoolRefillFailed: a refill failed (Err); the pool backs off before the next one.
	EventPoolRefillFailed EventKind = "pool_refill_failed"
)

// Refill back-off after consecutive failures: 250 ms, doubling, at most 30 s.
const (
	refillBackoffMin = 250 * time.Millisecond
	refillBackoffMax = 30 * time.Second
)

// PoolStatus is a task's warm pool at one moment.
type PoolStatus struct {
	// Target is how many ready samples the pool keeps.
	Target int
	// Ready counts the samples waiting to be taken; Filling those starting for the pool.
	Ready   int
	Filling int
	// Poolable is false when the task cannot be pooled; Reason then says why.
	Poolable bool
	Reason   string
	// Failures counts the refills that failed in a row (zero after a success).
	Failures int
}

type pool struct {
	t      *Task
	ctx    context.Context
	cancel context.CancelFunc
	// wake nudges the refiller: the target changed, a sample was taken, a refill ended.
	wake chan struct{}
	// done is closed when the refiller and every refill it started have returned.
	done chan struct{}

	mu       sync.Mutex
	target   int
	ready    []*Sample
	filling  int
	failures int
	// pauseUntil is when refills may start again after a failure.
	pauseUntil time.Time
	stopped    bool
	// warmAt is when each ready sample's warm marker was in place (see reconcile).
	warmAt map[string]time.Time
	// joined is closed, and replaced, whenever a sample joins ready: a SampleInit waiting for a
	// start slot takes it instead (see slotOrWarm).
	joined chan struct{}
	// joining are the refills that started and are not in ready yet, by project: a death
	// reported meanwhile has no ready sample to evict, and counts here instead (see fill).
	joining map[string]*joiner

	// shared lets other processes take the pool's samples (TaskSpec.SharePool).
	shared bool
	// from is the state the pool's samples start from (PrewarmOptions.From), nil for none;
	// fromKey names the snapshot it was told to fill from (see stateKey), of which from may
	// be the task's copy: takes match on it.
	from    *backend.State
	fromKey string
	// watching is set while the engine's event stream reports the deaths of the pool's
	// containers; a take checks that the sample still runs itself otherwise.
	watching atomic.Bool
}

// joiner is a refilled sample on its way into ready, with the deaths the event stream reported
// in its project since it started.
type joiner struct {
	s      *Sample
	deaths int
}

// reconcileEvery is how often a pool with ready samples checks that their warm markers are
// still there: another process may have taken one (TaskSpec.TakeShared).
const reconcileEvery = 500 * time.Millisecond

// Poolable reports whether the task's samples can be pooled, and why not. A backend without
// warm pool markers (backend.Pooler) pools nothing. A sample whose files reference per-sample
// variables (SAMPLE_METADATA_*, COMPOSE_PROJECT_NAME, a layout's names and log paths) is
// loaded with its own values, so no sample started in advance can stand in for it.
func (t *Task) Poolable() (bool, string) {
	if t.o.pooler == nil {
		return false, "the " + t.o.backend.Kind() + " backend keeps no warm pool markers"
	}
	return compose.Poolable(t.project)
}

// PrewarmOptions configures Task.Prewarm. The zero value is a pool of samples started as
// SampleInit starts them.
type PrewarmOptions struct {
	// From fills the pool from a snapshot of one of the task's samples: each pooled sample
	// starts at the snapshot's files and volumes, as Task.SampleFrom starts one, and so does
	// a SampleInit that finds the pool empty, while the pool fills from it. A snapshot its
	// sample owns is first copied for the task (its images tagged again, its volumes copied),
	// so that the pool outlives that sample; the copy goes with Task.Cleanup. A pool filled
	// from a snapshot is shared only with starts from the same snapshot.
	From *Snapshot
}

// Prewarm keeps n ready samples of the task from now on (n = 0 ends the pool), started in the
// background; it returns at once (see PoolStatus). Lowering n removes the surplus, and a pool
// told to fill from another snapshot (or none) removes the samples it holds. A task that
// cannot be pooled (see Poolable) is ErrInvalidConfig, on a backend without warm pools
// (backend.Pooler) a *backend.UnsupportedError, and an EventPoolRefused says why. Pooled
// samples are removed by Task.Cleanup.
func (t *Task) Prewarm(ctx context.Context, n int, opts ...PrewarmOptions) error {
	if n < 0 {
		return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("prewarm %s: negative pool size %d", t.name, n))
	}
	var opt PrewarmOptions
	if len(opts) > 0 {
		opt = opts[len(opts)-1]
	}
	if opt.From != nil {
		if err := t.checkSnapshot("prewarm "+t.name+" from snapshot", opt.From); err != nil {
			return err
		}
	}
	if t.o.pooler == nil {
		err := backend.Lacks("prewarm "+t.name, t.o.backend, "backend.Pooler")
		t.emit(Event{Kind: EventPoolRefused, Task: t.name, Message: err.Error()})
		return err
	}
	if ok, why := t.Poolable(); !ok {
		t.emit(Event{Kind: EventPoolRefused, Task: t.name, Message: why})
		return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("prewarm %s: the task cannot be pooled: %s", t.name, why))
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("prewarm %s: the task is cleaned up", t.name))
	}
	p := t.pool
	if p == nil {
		// The refills outlive the caller's ctx: the pool lives until Task.Cleanup.
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		p = &pool{t: t, ctx: pctx, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{}),
			joined: make(chan struct{}), joining: map[string]*joiner{}, shared: t.spec.SharePool}
		t.pool = p
		t.o.addPool(t)
		go p.run()
	}
	t.mu.Unlock()
	from, err := t.poolState(ctx, p, opt.From)
	if err != nil {
		return fmt.Errorf("prewarm %s: %w", t.name, err)
	}
	p.mu.Lock()
	p.target = n
	var surplus []*Sample
	if !sameState(p.from, from) {
		// Its samples started from what the pool no longer fills from.
		surplus = slices.Clone(p.ready)
		p.ready = nil
		p.from = from
		p.fromKey = ""
		if opt.From != nil {
			p.fromKey = stateKey(&opt.From.state)
		}
	}
	if len(p.ready) > n {
		surplus = append(surplus, p.ready[n:]...)
		p.ready = p.ready[:n]
	}
	p.mu.Unlock()
	p.nudge()
	for _, s := range surplus {
		p.discard(s)
	}
	return nil
}

// poolState is the state a pool fills from for sn: none for nil, sn's own when the task keeps
// it, else the task's copy of it (the pool's current one when sn is what it already fills
// from).
func (t *Task) poolState(ctx context.Context, p *pool, sn *Snapshot) (*backend.State, error) {
	if sn == nil {
		return nil, nil
	}
	if sn.task == t {
		st := sn.state
		return &st, nil
	}
	p.mu.Lock()
	cur, key := p.from, p.fromKey
	p.mu.Unlock()
	if cur != nil && key == stateKey(&sn.state) {
		return cur, nil
	}
	st, err := t.keepCopy(ctx, sn)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// sameState reports whether a and b are the same state (or both none).
func sameState(a, b *backend.State) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Owner == b.Owner && a.Name == b.Name
}

// poolFrom is the state the task's pool fills from, nil for none.
func (t *Task) poolFrom() *backend.State {
	p := t.currentPool()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.from
}

// stateKey names a snapshot by its owner and name: "" for none.
func stateKey(st *backend.State) string {
	if st == nil {
		return ""
	}
	return st.Owner + "/" + st.Name
}

// wantKey is the key of the snapshot a start for spec wants its sample from: the one the pool
// was told to fill from when spec's state is the pool's (its copy of that snapshot).
func (t *Task) wantKey(spec SampleSpec) string {
	if p := t.currentPool(); p != nil && spec.from != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if sameState(p.from, spec.from) {
			return p.fromKey
		}
	}
	return stateKey(spec.from)
}

// poolFingerprint is fingerprint for samples started from the snapshot key names: a sample
// started from a snapshot is no stand-in for one that was not, nor for one from another.
func (t *Task) poolFingerprint(key string) string {
	if key == "" {
		return t.fingerprint()
	}
	h := sha256.Sum256([]byte(t.fingerprint() + "\x00" + key))
	return hex.EncodeToString(h[:])[:16]
}

// prewarmFromSpec starts the pool TaskSpec.Warm asks for. A task that cannot be pooled is not
// an error there: its samples start cold, and the EventPoolRefused says why.
func (t *Task) prewarmFromSpec(ctx context.Context, n int) {
	if err := t.Prewarm(ctx, n); err != nil {
		t.o.cfg.log.Info("no warm pool", "task", t.name, "err", err)
	}
}

// PoolStatus is the task's warm pool now.
func (t *Task) PoolStatus() PoolStatus {
	ok, why := t.Poolable()
	st := PoolStatus{Poolable: ok, Reason: why}
	p := t.currentPool()
	if p == nil {
		return st
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st.Target, st.Ready, st.Filling, st.Failures = p.target, len(p.ready), p.filling, p.failures
	return st
}

// currentPool is the task's pool, nil before Prewarm.
func (t *Task) currentPool() *pool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pool
}

// readyNow reports whether a sample waits in the pool.
func (p *pool) readyNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready) > 0
}

func (p *pool) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run starts refills while the pool holds fewer than its target, ready and filling counted,
// each with a start slot nobody else wants.
func (p *pool) run() {
	var fills sync.WaitGroup
	defer func() {
		fills.Wait()
		close(p.done)
	}()
	fills.Go(p.watch)
	var timer *time.Timer
	tick := time.NewTicker(reconcileEvery)
	defer tick.Stop()
	for {
		// A stopped pool holds nothing ready, so it always seems to need refills: an idle
		// start slot is granted at once, cancelled or not, and only this check ends the loop.
		if p.ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		need := p.target - len(p.ready) - p.filling
		pause := time.Until(p.pauseUntil)
		p.mu.Unlock()
		if need <= 0 || pause > 0 {
			var after <-chan time.Time
			if pause > 0 {
				timer = time.NewTimer(pause)
				after = timer.C
			}
			select {
			case <-p.wake:
			case <-after:
			case <-tick.C:
				if p.shared {
					p.reconcile()
				}
			case <-p.ctx.Done():
				return
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}
		slot, err := p.t.o.starts.acquireIdle(p.ctx)
		if err != nil {
			return // the pool is stopping
		}
		p.mu.Lock()
		if p.stopped || p.target-len(p.ready)-p.filling <= 0 || time.Now().Before(p.pauseUntil) {
			p.mu.Unlock()
			slot.release(neutral)
			continue
		}
		p.filling++
		p.mu.Unlock()
		fills.Go(func() { p.fill(slot) })
	}
}

// fill starts one pooled sample on slot and puts it in the pool once it is ready.
//
// A container of the sample may die before the sample joins ready, where evict finds nothing
// to remove; the sample would then wait in the pool dead, and a take trusting the event stream
// would hand it out. So the sample is in joining from its start's return on, and joins ready
// only after a listing that started after that shows it still running, with no death reported
// in its project since the listing started (else it looks again: the death may be of a
// one-shot service, which the listing ignores). A death before the listing shows in it; one
// after it is reported before the join (counted) or after it (evicted); one the stream missed
// is found by the check each new stream starts with, which covers joining samples too.
func (p *pool) fill(slot *slot) {
	t := p.t
	p.mu.Lock()
	from, key := p.from, p.fromKey
	p.mu.Unlock()
	s, err := t.startSample(p.ctx, SampleSpec{from: from}, slot)
	// After the sample joined the pool (or failed): see startSample.
	defer func() { slot.release(t.o.outcomeOf(err)) }()
	var markedAt time.Time
	var id, project string // read before the sample joins the pool, where a take may rename it
	if err == nil {
		id, project = s.id, s.project
		p.mu.Lock()
		p.joining[project] = &joiner{s: s}
		p.mu.Unlock()
		err = t.o.pooler.MarkWarm(p.ctx, backend.WarmMarker{Marker: backend.Marker{Project: s.project, Task: t.name, Sample: s.id, Owner: t.o.owner}, Fingerprint: t.poolFingerprint(key), Shared: p.shared})
		markedAt = time.Now()
	}
	p.mu.Lock()
	for seen := -1; err == nil && p.joining[project].deaths != seen; {
		seen = p.joining[project].deaths
		p.mu.Unlock()
		if err = t.stillRunning(p.ctx, s); err != nil {
			err = fmt.Errorf("refill %s: %w", project, t.o.engineLost(err))
		}
		p.mu.Lock()
	}
	delete(p.joining, project)
	p.filling--
	switch {
	case err != nil:
		p.failures++
		backoff := min(refillBackoffMin<<min(p.failures-1, 16), refillBackoffMax)
		p.pauseUntil = time.Now().Add(backoff)
	case p.stopped || len(p.ready) >= p.target || !sameState(p.from, from):
		// Ended, shrunk or told to fill from another state while this one started: a pool
		// never holds more than asked, nor what it was not asked for.
		p.mu.Unlock()
		slot.release(succeeded)
		p.discard(s)
		p.nudge()
		return
	default:
		p.failures = 0
		s.announced = make(chan struct{})
		p.ready = append(p.ready, s)
		if p.warmAt == nil {
			p.warmAt = map[string]time.Time{}
		}
		p.warmAt[s.project] = markedAt
		close(p.joined)
		p.joined = make(chan struct{})
	}
	p.mu.Unlock()
	if err == nil {
		// After it joined, so that whoever sees the event finds it in the pool; a take waits
		// for the event (see announced), so that no observer sees it taken before it was warm.
		t.emit(Event{Kind: EventPoolWarm, Task: t.name, Sample: id, Project: project})
		close(s.announced)
	} else if s != nil {
		// Its warm marker failed, it died, or the pool is ending: nobody will take it.
		slot.release(t.o.outcomeOf(err)) // a removal is not a start
		p.discard(s)
	}
	p.nudge()
	if err != nil {
		if p.ctx.Err() == nil {
			t.emit(Event{Kind: EventPoolRefillFailed, Task: t.name, Err: err})
		}
	}
}

// reconcile forgets the ready samples whose warm marker is gone: another process took them.
// Only markers in place before the listing started count as missing.
func (p *pool) reconcile() {
	t := p.t
	p.mu.Lock()
	n := len(p.ready)
	p.mu.Unlock()
	if n == 0 {
		return
	}
	since := time.Now()
	warm, err := t.o.pooler.WarmProjects(p.ctx, t.name)
	if err != nil {
		return
	}
	have := map[string]bool{}
	for _, w := range warm {
		have[w.Project] = true
	}
	var gone []*Sample
	p.mu.Lock()
	p.ready = slices.DeleteFunc(p.ready, func(s *Sample) bool {
		if !have[s.project] && p.warmAt[s.project].Before(since) {
			gone = append(gone, s)
			delete(p.warmAt, s.project)
			return true
		}
		return false
	})
	p.mu.Unlock()
	for _, s := range gone {
		t.forget(s)
	}
	if len(gone) > 0 {
		p.nudge()
	}
}

// discard removes a pooled sample nobody will take.
func (p *pool) discard(s *Sample) {
	if err := s.Cleanup(p.ctx); err != nil {
		p.t.o.cfg.log.Warn("remove pooled sample", "project", s.project, "err", err)
	}
}

// takeWarm takes a ready sample from the pool for spec, or returns nil when there is none (or
// the task is cleaned up): SampleInit then starts a cold one. The sample gets spec's id, which
// its claim marker records for `ls` and `cleanup` in other processes: at once for a shared pool
// (whose take must first win the claim, atomic across processes), after the return otherwise.
func (t *Task) takeWarm(ctx context.Context, spec SampleSpec) *Sample {
	t.mu.Lock()
	p, closed := t.pool, t.closed
	t.mu.Unlock()
	if closed {
		return nil
	}
	want := t.wantKey(spec)
	if p == nil {
		return t.takeShared(ctx, spec, want)
	}
	for {
		start := time.Now()
		p.mu.Lock()
		if p.stopped || len(p.ready) == 0 || p.fromKey != want {
			p.mu.Unlock()
			return t.takeShared(ctx, spec, want)
		}
		s := p.ready[0]
		p.ready = p.ready[1:]
		delete(p.warmAt, s.project)
		p.mu.Unlock()
		p.nudge()
		id := cmp.Or(spec.ID, s.id)
		if p.shared {
			won, err := t.o.pooler.Take(ctx, s.project)
			switch {
			case !won && err == nil:
				// Another process took it (or removed it): it is no longer this task's.
				t.forget(s)
				continue
			case !won:
				t.o.cfg.log.Warn("take pooled sample", "project", s.project, "err", err)
				go p.discard(s)
				return nil
			}
		}
		// It waited in the pool: make sure it still runs as it did when it became ready.
		// The event stream says so for free; without it, one listing does.
		if !p.watching.Load() {
			if err := t.stillRunning(ctx, s); err != nil {
				t.o.cfg.log.Warn("pooled sample is no longer ready", "project", s.project, "err", err)
				go p.discard(s)
				continue
			}
		}
		// The fill that put it in the pool emits its pool_warm right after; the take's events
		// come after that one.
		<-s.announced
		// Under the sample's cleanup lock: a Task.Cleanup racing this take reads both.
		s.cleanupMu.Lock()
		s.id = id
		s.recordTake(p.shared)
		s.cleanupMu.Unlock()
		t.taken(s, start)
		return s
	}
}

// recordTake writes, after SampleInit returned, what tells other processes the sample was taken
// and by whom: the claim marker (for a pool that is not shared, the removal of the warm marker
// first) and the state cache's record. Cleanup and Detach wait for it (see settled), so no
// marker is written behind a removal.
func (s *Sample) recordTake(shared bool) {
	t := s.task
	done := make(chan struct{})
	s.pending = done
	go func() {
		defer close(done)
		ctx, cancel := teardownContext(t.life)
		defer cancel()
		if shared {
			if err := t.o.pooler.RecordClaim(ctx, s.marker()); err != nil {
				// Ours, but unrecorded: `ls` shows the id it started with.
				t.o.cfg.log.Warn("take pooled sample", "project", s.project, "err", err)
			}
		} else if won, err := t.o.pooler.Claim(ctx, s.marker()); !won || err != nil {
			// Nobody else takes from a pool that is not shared: the project was removed
			// behind our back (`composebox cleanup PROJECT`), which the sample's calls report.
			t.o.cfg.log.Warn("record the take of a pooled sample", "project", s.project, "won", won, "err", err)
		}
		_ = t.o.track(s)
	}()
}

// settled waits until the sample's bookkeeping written in the background (see recordTake) is
// done, or ctx ends.
func (s *Sample) settled(ctx context.Context) {
	if s.pending == nil {
		return
	}
	select {
	case <-s.pending:
	case <-ctx.Done():
	}
}

// slotOrWarm waits for a start slot for a cold SampleInit, unless a refill in flight comes up
// first: then it takes that sample instead and returns it, with no slot. A SampleInit that
// waits for a slot keeps the pool from starting more refills (they take only capacity nobody
// waits for), so only those already started can come up. The wait for the slot keeps its place
// in the queue throughout.
func (t *Task) slotOrWarm(ctx context.Context, spec SampleSpec) (*slot, *Sample, error) {
	p := t.currentPool()
	if p == nil {
		sl, err := t.o.starts.acquire(ctx)
		return sl, nil, err
	}
	type acquired struct {
		slot *slot
		err  error
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan acquired, 1)
	go func() {
		sl, err := t.o.starts.acquire(actx)
		got <- acquired{sl, err}
	}()
	for {
		p.mu.Lock()
		joined := p.joined
		if p.filling == 0 {
			joined = nil // nothing can come up: wait for the slot alone
		}
		p.mu.Unlock()
		select {
		case r := <-got:
			// A refill releases its slot only after its sample joined the pool: take that
			// sample rather than start another.
			if r.err == nil && p.readyNow() {
				if s := t.takeWarm(ctx, spec); s != nil {
					r.slot.release(neutral)
					return nil, s, nil
				}
			}
			return r.slot, nil, r.err
		case <-joined:
			if s := t.takeWarm(ctx, spec); s != nil {
				cancel()
				// Granted meanwhile or not, the slot goes back to whoever waits next.
				(<-got).slot.release(neutral)
				return nil, s, nil
			}
		}
	}
}

// taken records a sample SampleInit took from a pool.
func (t *Task) taken(s *Sample, start time.Time) {
	t.emit(Event{Kind: EventPoolTaken, Task: t.name, Sample: s.id, Project: s.project, Duration: time.Since(start)})
	t.emit(Event{Kind: EventSampleHealthy, Task: t.name, Sample: s.id, Project: s.project, Duration: time.Since(start)})
}

// takeShared takes, when TakeShared is set, a ready sample from the pool another live process
// keeps for a task of the same name and configuration, or returns nil. The claim marker names
// this process as an owner too, so the sample lives while either process does; the keeper
// sees the marker gone and forgets the sample.
func (t *Task) takeShared(ctx context.Context, spec SampleSpec, want string) *Sample {
	if !t.spec.TakeShared || t.o.pooler == nil {
		return nil
	}
	start := time.Now()
	warm, err := t.o.pooler.WarmProjects(ctx, t.name)
	if err != nil {
		t.o.cfg.log.Warn("find shared warm samples", "task", t.name, "err", err)
		return nil
	}
	fp := t.poolFingerprint(want)
	for _, w := range warm {
		if !w.Shared || w.Fingerprint != fp || w.Owner == t.o.owner || tracking.OwnerStatus(w.Owner) != backend.StatusAlive {
			continue
		}
		id := cmp.Or(spec.ID, w.Sample)
		won, err := t.o.pooler.Claim(ctx, backend.Marker{Project: w.Project, Task: t.name, Sample: id, Owner: t.o.owner})
		if !won {
			if err != nil {
				t.o.cfg.log.Warn("take shared warm sample", "project", w.Project, "err", err)
			}
			continue
		}
		s, err := t.o.Open(ctx, w.Project)
		if err != nil {
			// Claimed but unusable: it is ours now, so remove it.
			t.o.cfg.log.Warn("open shared warm sample", "project", w.Project, "err", err)
			_, _ = t.o.down(context.WithoutCancel(ctx), w.Project)
			continue
		}
		s.task, s.id, s.created, s.pooled = t, id, w.Created, true
		if err := t.register(s); err != nil {
			return nil // cleaned up meanwhile: the cold path reports it
		}
		_ = t.o.track(s)
		t.taken(s, start)
		return s
	}
	return nil
}

// stillRunning checks, in one listing, that every sandbox of s still runs.
func (t *Task) stillRunning(ctx context.Context, s *Sample) error {
	list, err := t.o.backend.Containers(ctx, labels.ProjectSelector(s.project), false)
	if err != nil {
		return err
	}
	running := map[string]bool{}
	for _, c := range list {
		if c.State == backend.StateRunning {
			running[c.ID] = true
		}
	}
	for _, sb := range s.sandboxes {
		if !running[sb.ContainerID()] {
			return cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("service %s is not running", sb.service))
		}
	}
	return nil
}

// forget drops a pooled sample another process took: it is not this task's to remove.
func (t *Task) forget(s *Sample) {
	t.mu.Lock()
	delete(t.samples, s.project)
	delete(t.projects, s.project)
	t.mu.Unlock()
}

// stopPool ends the refills and waits for them, before Task.Cleanup removes the samples: a
// refill still starting would otherwise create containers behind the removal. It returns the
// samples that were waiting in the pool and are still this task's: those of a shared pool are
// claimed back first, so that one another process took in the meantime is left to it.
func (t *Task) stopPool(ctx context.Context) []*Sample {
	p := t.currentPool()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	first := !p.stopped
	p.stopped = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	if !first {
		<-p.done
		return nil
	}
	p.cancel()
	<-p.done
	t.o.removePool(t)
	if !p.shared {
		return ready
	}
	dctx, cancel := teardownContext(ctx)
	defer cancel()
	return slices.DeleteFunc(ready, func(s *Sample) bool {
		won, err := t.o.pooler.Claim(dctx, s.marker())
		if !won && err == nil {
			t.forget(s)
			return true
		}
		return false
	})
}

// addPool and removePool keep the set of live pools, which Close ends.
func (o *Orchestrator) addPool(t *Task) {
	o.poolsMu.Lock()
	defer o.poolsMu.Unlock()
	if o.pools == nil {
		o.pools = map[*Task]bool{}
	}
	o.pools[t] = true
}

func (o *Orchestrator) removePool(t *Task) {
	o.poolsMu.Lock()
	defer o.poolsMu.Unlock()
	delete(o.pools, t)
}

// closePools ends every pool whose task was not cleaned up, and removes the samples waiting in
// them: nobody can take them any more, and nothing else would remove them while this process
// lives.
func (o *Orchestrator) closePools() error {
	o.poolsMu.Lock()
	tasks := slices.Collect(maps.Keys(o.pools))
	o.poolsMu.Unlock()
	var errs *multierror.Error
	for _, t := range tasks {
		dctx, cancel := teardownContext(context.Background())
		for _, s := range t.stopPool(dctx) {
			if err := s.cleanup(dctx); err != nil {
				errs = multierror.Append(errs, err)
			}
		}
		cancel()
	}
	return errs.ErrorOrNil()
}

// watch follows the engine's events for the deaths of the pool's containers, and drops a
// waiting sample whose container died: a take then never hands out a dead sample, without
// asking the daemon. While the stream is down, takes check for themselves (see watching).
func (p *pool) watch() {
	t := p.t
	sel := []string{labels.LabelPool + "=" + labels.PoolPooled, labels.LabelTask + "=" + t.name}
	backoff := refillBackoffMin
	for p.ctx.Err() == nil {
		// The backend replays the deaths since the subscription's start, so a death while
		// the stream was down is not missed; the second of slack covers clock granularity.
		since := time.Now().Add(-time.Second)
		sctx, cancel := context.WithCancel(p.ctx)
		deaths, errs := t.o.backend.WatchDeaths(sctx, backend.WatchOptions{Labels: sel, Since: since})
		if err := p.checkReady(); err == nil {
			p.watching.Store(true)
			backoff = refillBackoffMin
		}
		for d := range deaths {
			p.evict(d.Project, "a container died: "+d.Container)
		}
		if err := <-errs; p.ctx.Err() == nil {
			t.o.cfg.log.Debug("pool event stream ended", "task", t.name, "err", err)
		}
		p.watching.Store(false)
		cancel()
		select {
		case <-p.ctx.Done():
		case <-time.After(backoff):
			backoff = min(2*backoff, refillBackoffMax)
		}
	}
}

// checkReady drops the waiting samples that no longer run, and counts a death against those
// joining the pool (see fill), one listing each: a death while no stream was open is missed.
func (p *pool) checkReady() error {
	p.mu.Lock()
	ready := slices.Clone(p.ready)
	for _, j := range p.joining {
		ready = append(ready, j.s)
	}
	p.mu.Unlock()
	for _, s := range ready {
		if err := p.t.stillRunning(p.ctx, s); err != nil {
			if p.ctx.Err() != nil {
				return err
			}
			p.evict(s.project, err.Error())
		}
	}
	return nil
}

// evict removes project from the samples waiting in the pool, if it is one, and discards it. A
// sample still joining the pool is its fill's: the death counts against it there.
func (p *pool) evict(project, why string) {
	p.mu.Lock()
	if j := p.joining[project]; j != nil {
		j.deaths++
		p.mu.Unlock()
		return
	}
	var gone *Sample
	p.ready = slices.DeleteFunc(p.ready, func(s *Sample) bool {
		if s.project == project {
			gone = s
			return true
		}
		return false
	})
	delete(p.warmAt, project)
	p.mu.Unlock()
	if gone == nil {
		return
	}
	p.t.o.cfg.log.Warn("pooled sample is no longer ready", "project", project, "why", why)
	p.discard(gone)
	p.nudge()
}

// markPooled adds the pool marker to every container and network of a pooled sample.
func markPooled(p *types.Project) {
	for name, svc := range p.Services {
		svc.CustomLabels = maps.Clone(svc.CustomLabels)
		if svc.CustomLabels == nil {
			svc.CustomLabels = types.Labels{}
		}
		svc.CustomLabels[labels.LabelPool] = labels.PoolPooled
		p.Services[name] = svc
	}
	for name, n := range p.Networks {
		if n.External {
			continue
		}
		n.CustomLabels = maps.Clone(n.CustomLabels)
		if n.CustomLabels == nil {
			n.CustomLabels = types.Labels{}
		}
		n.CustomLabels[labels.LabelPool] = labels.PoolPooled
		p.Networks[name] = n
	}
}

// marker names the sample, and this process as the one acting on it.
func (s *Sample) marker() backend.Marker {
	return backend.Marker{Project: s.project, Task: s.task.name, Sample: s.id, Owner: s.o.owner}
}

// fingerprint names the task's configuration in its warm markers: its loaded project and the
// images built for it.
func (t *Task) fingerprint() string {
	t.fpOnce.Do(func() {
		h := sha256.New()
		_ = json.NewEncoder(h).Encode(struct {
			Project *types.Project
			Images  map[string]string
		}{t.project, t.images})
		t.fp = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return t.fp
}
