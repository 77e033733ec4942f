package api

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// subscriberBuffer is how many events wait for one slow /v1/events client before it starts
// losing them.
const subscriberBuffer = 256

// Events fans the orchestrator's events out to the /v1/events streams. Observe never blocks: a
// subscriber that falls behind loses events and is told how many.
type Events struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch      chan orchestrator.Event
	dropped atomic.Int64
}

// NewEvents returns an empty fan-out.
func NewEvents() *Events { return &Events{subs: map[*subscriber]struct{}{}} }

// Observe is an orchestrator.Observer: pass it to orchestrator.WithObserver.
func (ev *Events) Observe(e orchestrator.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for s := range ev.subs {
		select {
		case s.ch <- e:
		default:
			s.dropped.Add(1)
		}
	}
}

func (ev *Events) subscribe() *subscriber {
	s := &subscriber{ch: make(chan orchestrator.Event, subscriberBuffer)}
	ev.mu.Lock()
	ev.subs[s] = struct{}{}
	ev.mu.Unlock()
	return s
}

func (ev *Events) unsubscribe(s *subscriber) {
	ev.mu.Lock()
	delete(ev.subs, s)
	ev.mu.Unlock()
}

// Event is one line of /v1/events.
type Event struct {
	Type            string    `json:"type"`
	Kind            string    `json:"kind,omitempty"`
	Time            time.Time `json:"time,omitzero"`
	Task            string    `json:"task,omitempty"`
	Sample          string    `json:"sample,omitempty"`
	Project         string    `json:"project,omitempty"`
	Service         string    `json:"service,omitempty"`
	Engine          string    `json:"engine,omitempty"`
	DurationSeconds float64   `json:"duration_seconds,omitempty"`
	Error           string    `json:"error,omitempty"`
	Message         string    `json:"message,omitempty"`
	Count           int64     `json:"count,omitempty"`
}

func eventJSON(e orchestrator.Event) Event {
	out := Event{Type: "event", Kind: string(e.Kind), Time: e.Time.UTC(), Task: e.Task, Sample: e.Sample,
		Project: e.Project, Service: e.Service, Engine: e.Engine, DurationSeconds: e.Duration.Seconds(), Message: e.Message}
	if e.Err != nil {
		out.Error = e.Err.Error()
	}
	return out
}

func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	sub := s.opts.Events.subscribe()
	defer s.opts.Events.unsubscribe(sub)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := newStreamWriter(w, s.opts.WriteTimeout)
	defer out.clear()
	if err := out.rc.Flush(); err != nil {
		return nil
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case e := <-sub.ch:
			if n := sub.dropped.Swap(0); n > 0 {
				if out.event(Event{Type: "dropped", Count: n}) != nil {
					return nil
				}
			}
			if out.event(eventJSON(e)) != nil {
				return nil
			}
		}
	}
}
