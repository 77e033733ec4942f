package orchestrator

import (
	"context"
	"testing"
)

// A refill's slot is capacity nobody waits for, one slot kept spare: it waits while a
// SampleInit is queued or only the spare slot is free, and is admitted once the queue is empty
// and more than the spare is free.
func TestLimitsIdleAcquireYieldsToWaitersAndKeepsASpare(t *testing.T) {
	g := newGate("start", 3, false)
	a := mustAcquire(t, g)
	b := mustAcquire(t, g)
	idle := make(chan *slot, 1)
	go func() {
		s, err := g.acquireIdle(t.Context())
		if err != nil {
			t.Error(err)
		}
		idle <- s
	}()
	// 2 of 3 in flight: the free one is the spare, so the refill waits.
	c := mustAcquire(t, g)
	w := enqueue(t, t.Context(), g)
	a.release(neutral) // goes to the queued SampleInit, not to the refill
	d := <-w.slot
	select {
	case <-idle:
		t.Fatal("the refill took a slot while a SampleInit was queued or only the spare was free")
	default:
	}
	b.release(neutral)
	c.release(neutral) // 1 of 3 in flight, nobody queued: room beyond the spare
	s := <-idle
	wantStats(t, g, 3, 2, 0)
	s.release(neutral)
	d.release(neutral)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	full := newGate("start", 1, false)
	mustAcquire(t, full)
	if _, err := full.acquireIdle(ctx); err == nil {
		t.Fatal("a cancelled idle acquire got a slot of a full gate")
	}
}
