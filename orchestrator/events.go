package orchestrator

import "time"

// EventKind names a lifecycle step.
type EventKind string

const (
	EventImageBuilt    EventKind = "image_built"    // a task image was built (not found cached)
	EventTaskReady     EventKind = "task_ready"     // TaskInit finished
	EventSampleStarted EventKind = "sample_started" // containers created and started
	EventSampleHealthy EventKind = "sample_healthy" // every service ready
	EventSampleFailed  EventKind = "sample_failed"  // SampleInit failed (the sample is torn down)
	EventSampleRemoved EventKind = "sample_removed" // Sample.Cleanup finished
	EventServiceReady  EventKind = "service_ready"  // one service of a sample became ready
	// EventServiceProgress: one service's container took a step while the sample started;
	// Message is the step: creating, created, starting, started (or recreated, ...).
	EventServiceProgress EventKind = "service_progress"
	// EventAdapted: the sample's project was changed so that it can run beside other samples
	// (Message says how: a container_name turned into an alias, a host port made ephemeral, ...).
	EventAdapted EventKind = "adapted"
	// EventSamplePlaced: a backend of several engines chose the sample's engine (Engine);
	// Message says why (its load, whether it had the images).
	EventSamplePlaced EventKind = "sample_placed"
	// EventEgressDenied: the sample's egress gateway refused a lookup or a connection of
	// Service (Denial says what and why; Message in a sentence).
	EventEgressDenied EventKind = "egress_denied"
)

// Event is one step of a task's or sample's life. Duration is the step's own duration (for
// sample_healthy and service_ready, from SampleInit's start).
type Event struct {
	Kind    EventKind
	Time    time.Time
	Task    string
	Sample  string
	Project string
	Service string
	// Engine names the engine of the sample (sample_placed).
	Engine   string
	Duration time.Duration
	Err      error
	// Message describes the event in a sentence, where its kind alone does not (adapted), or
	// names the step (service_progress).
	Message string
	// Denial is the refused attempt of an egress_denied event.
	Denial *EgressDenial
}

// Observer receives events. It is called synchronously, so it must not block.
type Observer func(Event)

// emit reports e to the orchestrator's observer and to the task's own (TaskSpec.Observer).
func (t *Task) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	t.o.emit(e)
	if t.spec.Observer != nil {
		t.spec.Observer(e)
	}
}

// emit reports e as an event of the sample's task, or to the orchestrator's observer alone for
// a sample that has no task (one found with Open).
func (s *Sample) emit(e Event) {
	if s.task != nil {
		s.task.emit(e)
		return
	}
	s.o.emit(e)
}
