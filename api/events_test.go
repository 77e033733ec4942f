package api

import (
	"testing"

	"github.com/composebox/composebox/orchestrator"
)

// TestEventsNeverBlock: a subscriber that reads nothing costs the publisher nothing; it loses
// what does not fit its buffer and the loss is counted. Another lease's events never reach it.
func TestEventsNeverBlock(t *testing.T) {
	ev := newEvents()
	sub := ev.subscribe("l-a")
	defer ev.unsubscribe(sub)
	n := subscriberBuffer + 44
	for range n {
		ev.observer("l-a")(orchestrator.Event{Kind: orchestrator.EventSampleStarted})
		ev.observer("l-b")(orchestrator.Event{Kind: orchestrator.EventSampleFailed})
	}
	if len(sub.ch) != subscriberBuffer || sub.dropped.Load() != 44 {
		t.Fatalf("buffered %d, dropped %d; want %d and 44", len(sub.ch), sub.dropped.Load(), subscriberBuffer)
	}
	for len(sub.ch) > 0 {
		if e := <-sub.ch; e.Kind != orchestrator.EventSampleStarted {
			t.Fatalf("lease a's stream got %s, an event of lease b", e.Kind)
		}
	}
}
