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

// events fans the orchestrator's events out to the /v1/events streams, each event to the
// streams of the lease whose task it belongs to. Publishing never blocks: a subscriber that
// falls behind loses events and is told how many.
type events struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	lease   string
	ch      chan orchestrator.Event
	dropped atomic.Int64
}

func newEvents() *events { return &events{subs: map[*subscriber]struct{}{}} }

// observer is the TaskSpec.Observer of a task of lease: its events go to that lease's streams
// only.
func (ev *events) observer(lease string) orchestrator.Observer {
	return func(e orchestrator.Event) { ev.publish(lease, e) }
}

func (ev *events) publish(lease string, e orchestrator.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for s := range ev.subs {
		if s.lease != lease {
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.dropped.Add(1)
		}
	}
}

func (ev *events) subscribe(lease string) *subscriber {
	s := &subscriber{lease: lease, ch: make(chan orchestrator.Event, subscriberBuffer)}
	ev.mu.Lock()
	ev.subs[s] = struct{}{}
	ev.mu.Unlock()
	return s
}

func (ev *events) unsubscribe(s *subscriber) {
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
	// Denial is what the sample's egress gateway refused (egress_denied).
	Denial *orchestrator.EgressDenial `json:"denial,omitempty"`
}

func eventJSON(e orchestrator.Event) Event {
	out := Event{Type: "event", Kind: string(e.Kind), Time: e.Time.UTC(), Task: e.Task, Sample: e.Sample,
		Project: e.Project, Service: e.Service, Engine: e.Engine, DurationSeconds: e.Duration.Seconds(), Message: e.Message, Denial: e.Denial}
	if e.Err != nil {
		out.Error = e.Err.Error()
	}
	return out
}

// streamEvents streams the events of the asking lease's tasks and samples, until the client
// goes, the lease ends or the server stops. Every event belongs to a task, and so to a lease:
// a request without a lease is refused, as on the other routes of tasks and samples.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	leaseID, err := leaseOf(r)
	if err != nil {
		return err
	}
	ended, err := s.leaseEnded(leaseID)
	if err != nil {
		return err
	}
	sub := s.events.subscribe(leaseID)
	defer s.events.unsubscribe(sub)
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
		case <-ended:
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
