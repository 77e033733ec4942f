package api

import (
	"testing"

	"github.com/composebox/composebox/orchestrator"
)

// TestEventsNeverBlock: a subscriber that reads nothing costs the observer nothing; it loses
// what does not fit its buffer and the loss is counted.
func TestEventsNeverBlock(t *testing.T) {
	ev := NewEvents()
	sub := ev.subscribe()
	defer ev.unsubscribe(sub)
	n := subscriberBuffer + 44
	for range n {
		ev.Observe(orchestrator.Event{Kind: orchestrator.EventSampleStarted})
	}
	if len(sub.ch) != subscriberBuffer || sub.dropped.Load() != 44 {
		t.Fatalf("buffered %d, dropped %d; want %d and 44", len(sub.ch), sub.dropped.Load(), subscriberBuffer)
	}
}
