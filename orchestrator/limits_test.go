package orchestrator

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
)

// waiterOf is one acquire running in its own goroutine.
type waiterOf struct {
	slot chan *slot
	err  chan error
}

// enqueue starts an acquire on g and returns once it is queued, so that waiters queue in the
// order they are enqueued. It fails the test if the acquire is admitted at once instead.
func enqueue(t *testing.T, ctx context.Context, g *gate) waiterOf {
	t.Helper()
	_, _, before := g.stats()
	w := waiterOf{slot: make(chan *slot, 1), err: make(chan error, 1)}
	go func() {
		s, err := g.acquire(ctx)
		if err != nil {
			w.err <- err
			return
		}
		w.slot <- s
	}()
	waitUntil(t, func() bool { _, _, n := g.stats(); return n == before+1 })
	return w
}

// waitUntil polls cond until it holds; it yields rather than sleeps, and gives up with the
// test's deadline (or after a generous bound when there is none).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		runtime.Gosched()
	}
}

// mustAcquire takes a slot that must be free now.
func mustAcquire(t *testing.T, g *gate) *slot {
	t.Helper()
	width, inflight, waiting := g.stats()
	if inflight >= width || waiting > 0 {
		t.Fatalf("no free slot: width %d, inflight %d, waiting %d", width, inflight, waiting)
	}
	s, err := g.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantStats(t *testing.T, g *gate, width, inflight, waiting int) {
	t.Helper()
	w, i, q := g.stats()
	if w != width || i != inflight || q != waiting {
		t.Fatalf("width %d, inflight %d, waiting %d; want %d, %d, %d", w, i, q, width, inflight, waiting)
	}
}

func TestLimitsDefaultsAndOptions(t *testing.T) {
	if got, want := DefaultLimits(2), (Limits{Builds: 2, Starts: 4, Teardowns: 4}); got != want {
		t.Errorf("DefaultLimits(2) = %+v, want %+v", got, want)
	}
	if got := DefaultLimits(0); got.Builds != 1 || got.Starts != 2 {
		t.Errorf("DefaultLimits(0) = %+v: want at least one CPU's worth", got)
	}
	for _, tc := range []struct {
		name string
		opts []Option
		want Limits
		err  string
	}{
		{name: "defaults", want: Limits{Builds: 2, Starts: 4, Teardowns: 4}},
		{name: "execs alone", opts: []Option{WithLimits(Limits{Execs: 3})}, want: Limits{Builds: 2, Starts: 4, Teardowns: 4, Execs: 3}},
		{name: "max samples is starts", opts: []Option{WithMaxConcurrentSamples(7)}, want: Limits{Builds: 2, Starts: 7, Teardowns: 4}},
		{name: "zero field keeps an earlier option", opts: []Option{WithMaxConcurrentSamples(7), WithLimits(Limits{Builds: 1})}, want: Limits{Builds: 1, Starts: 7, Teardowns: 4}},
		{name: "later option wins", opts: []Option{WithLimits(Limits{Starts: 3, Teardowns: 9}), WithMaxConcurrentSamples(5)}, want: Limits{Builds: 2, Starts: 5, Teardowns: 9}},
		{name: "negative", opts: []Option{WithLimits(Limits{Teardowns: -1})}, err: "limits: teardowns -1: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			for _, o := range tc.opts {
				if err := o(&c); err != nil {
					if tc.err == "" || err.Error() != tc.err {
						t.Fatalf("option: %v, want %q", err, tc.err)
					}
					return
				}
			}
			if tc.err != "" {
				t.Fatalf("no error, want %q", tc.err)
			}
			if got := c.limits.orDefaults(2); got != tc.want {
				t.Errorf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLimitsNilGateIsUnbounded(t *testing.T) {
	var g *gate
	if newGate("exec", 0, false) != nil {
		t.Fatal("a zero limit should make no gate")
	}
	for range 1000 {
		s, err := g.acquire(t.Context())
		if err != nil || s != nil {
			t.Fatalf("nil gate: %v, %v", s, err)
		}
		s.release(succeeded)
	}
	g.congested()
}

func TestLimitsRampWidensOnePerSuccessUpToTheBound(t *testing.T) {
	g := newGate("start", 5, true)
	wantStats(t, g, 2, 0, 0)
	a, b := mustAcquire(t, g), mustAcquire(t, g)
	ws := make([]waiterOf, 4)
	for i := range ws {
		ws[i] = enqueue(t, t.Context(), g)
	}
	wantStats(t, g, 2, 2, 4)

	// One success frees its slot and widens by one: two waiters get in.
	a.release(succeeded)
	wantStats(t, g, 3, 3, 2)
	// A release for another reason only frees the slot.
	b.release(neutral)
	wantStats(t, g, 3, 3, 1)
	b.release(succeeded) // a second release of one slot counts for nothing
	wantStats(t, g, 3, 3, 1)

	held := []*slot{<-ws[0].slot, <-ws[1].slot, <-ws[2].slot}
	held[0].release(succeeded)
	wantStats(t, g, 4, 3, 0)
	last := <-ws[3].slot
	held[1].release(succeeded)
	held[2].release(succeeded)
	wantStats(t, g, 5, 1, 0) // capped at the bound
	last.release(succeeded)
	wantStats(t, g, 5, 0, 0)
}

func TestLimitsRampHalvesOncePerRoundOnTransientErrors(t *testing.T) {
	g := newGate("start", 8, true)
	// Ramp to the bound.
	for g.width < 8 {
		mustAcquire(t, g).release(succeeded)
	}
	var held []*slot
	for range 8 {
		held = append(held, mustAcquire(t, g))
	}
	w := enqueue(t, t.Context(), g)

	// Every operation in flight sees the same hiccup: only the first cut counts.
	held[0].release(transient)
	wantStats(t, g, 4, 7, 1)
	held[1].release(transient)
	held[2].release(transient)
	wantStats(t, g, 4, 5, 1)
	// Nor does a congestion signal: nothing was admitted since the cut.
	g.congested()
	wantStats(t, g, 4, 5, 1)
	for _, s := range held[3:6] {
		s.release(neutral)
	}
	wantStats(t, g, 4, 3, 0) // the waiter got in at inflight 2 < 4
	admitted := <-w.slot

	// A failure of an operation admitted after the cut cuts again, down to one and no lower.
	admitted.release(transient)
	wantStats(t, g, 2, 2, 0)
	s := func() *slot { held[6].release(neutral); held[7].release(neutral); return mustAcquire(t, g) }()
	g.congested()
	wantStats(t, g, 1, 1, 0)
	s.release(transient) // admitted before the last cut: no further cut
	wantStats(t, g, 1, 0, 0)
	mustAcquire(t, g).release(transient)
	wantStats(t, g, 1, 0, 0)
	// And it ramps back.
	mustAcquire(t, g).release(succeeded)
	wantStats(t, g, 2, 0, 0)
}

func TestLimitsFixedGate(t *testing.T) {
	g := newGate("teardown", 2, false)
	a, b := mustAcquire(t, g), mustAcquire(t, g)
	w := enqueue(t, t.Context(), g)
	a.release(transient) // a fixed gate neither halves
	wantStats(t, g, 2, 2, 0)
	c := <-w.slot
	b.release(succeeded) // nor widens
	c.release(succeeded)
	g.congested()
	wantStats(t, g, 2, 0, 0)
}

func TestLimitsWaitersAreServedInArrivalOrder(t *testing.T) {
	g := newGate("build", 1, false)
	s := mustAcquire(t, g)
	ws := make([]waiterOf, 5)
	for i := range ws {
		ws[i] = enqueue(t, t.Context(), g)
	}
	for i := range ws {
		s.release(neutral)
		for j := i + 1; j < len(ws); j++ {
			select {
			case <-ws[j].slot:
				t.Fatalf("waiter %d admitted before waiter %d", j, i)
			default:
			}
		}
		s = <-ws[i].slot
	}
	s.release(neutral)
	wantStats(t, g, 1, 0, 0)
}

func TestLimitsCancelledWaiterGetsItsContextError(t *testing.T) {
	g := newGate("start", 1, true)
	s := mustAcquire(t, g)
	ctx, cancel := context.WithCancel(t.Context())
	w := enqueue(t, ctx, g)
	behind := enqueue(t, t.Context(), g)
	cancel()
	err := <-w.err
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "wait for a start slot: ") {
		t.Fatalf("cancelled waiter: %v", err)
	}
	wantStats(t, g, 1, 1, 1)
	// The slot goes to the waiter behind it, and the count stays right.
	s.release(neutral)
	(<-behind.slot).release(neutral)
	wantStats(t, g, 1, 0, 0)

	// An already cancelled ctx never takes a slot, even a free one.
	if _, err := g.acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with a cancelled ctx: %v", err)
	}
	wantStats(t, g, 1, 0, 0)
}

func TestLimitsTeardownWaitOutlivesTheCallersContext(t *testing.T) {
	g := newGate("teardown", 1, false)
	s := mustAcquire(t, g)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the caller gave up (Ctrl-C) before its teardown got a slot
	dctx, dcancel := teardownContext(ctx)
	defer dcancel()
	if _, ok := dctx.Deadline(); !ok {
		t.Fatal("a teardown context must have a deadline")
	}
	w := enqueue(t, dctx, g)
	s.release(neutral)
	select {
	case s := <-w.slot:
		s.release(neutral)
	case err := <-w.err:
		t.Fatalf("teardown slot wait ended with its caller's ctx: %v", err)
	}
}

func TestLimitsExecBoundHoldsAStreamUntilItEnds(t *testing.T) {
	testutil.Docker(t)
	o, err := New(WithStateDir(t.TempDir()), WithLimits(Limits{Execs: 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	task, err := o.TaskInit(t.Context(), TaskSpec{Name: "exec-bound-" + compose.NewSampleID(), YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    network_mode: none
`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := task.Cleanup(context.Background()); err != nil {
			t.Errorf("task cleanup: %v", err)
		}
	})
	s, err := task.SampleInit(t.Context(), SampleSpec{})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	sb := s.Default()

	p, err := sb.ExecStream(t.Context(), ExecRequest{Cmd: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	wantStats(t, o.execs, 1, 1, 0) // the stream holds the slot once ExecStream has returned
	type result struct {
		res ExecResult
		err error
	}
	queued := make(chan result, 1)
	go func() {
		res, err := sb.Exec(t.Context(), ExecRequest{Cmd: []string{"true"}})
		queued <- result{res, err}
	}()
	waitUntil(t, func() bool { _, _, n := o.execs.stats(); return n == 1 })

	// A caller that gives up while queued gets its ctx error, named by the operation.
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := sb.ReadFile(ctx, "/etc/passwd")
		gaveUp <- err
	}()
	waitUntil(t, func() bool { _, _, n := o.execs.stats(); return n == 2 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "read /etc/passwd in default: wait for an exec slot") {
		t.Errorf("cancelled read: %v", err)
	}

	// Ending the stream frees its slot for the queued exec.
	if err := p.Kill(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-queued
	if r.err != nil || r.res.ExitCode != 0 {
		t.Fatalf("queued exec: %v, exit %d", r.err, r.res.ExitCode)
	}
	wantStats(t, o.execs, 1, 0, 0)
}
