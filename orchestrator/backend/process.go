package backend

import (
	"bytes"
	"context"
	"sync"
)

// StreamKind says which output stream a chunk came from.
type StreamKind int

const (
	Stdout StreamKind = 1
	Stderr StreamKind = 2
)

func (k StreamKind) String() string {
	if k == Stderr {
		return "stderr"
	}
	return "stdout"
}

// Event is one chunk of output, as the backend delivered it, or a marker of output Events
// dropped.
type Event struct {
	Stream StreamKind
	Data   []byte // owned by the receiver
	// Dropped, when positive, marks a gap: Dropped bytes of Stream were not delivered on
	// Events, because its reader fell too far behind (Data is then nil). The command never
	// waits for the reader of Events: the result's tail, and the Stdout and Stderr writers
	// of the request, still have every byte.
	Dropped int64
}

// Process is a command started by a streaming exec. Its methods are safe for concurrent use.
// A backend makes one with NewProcess and drives it through the ProcessFeed.
type Process struct {
	events   chan Event
	done     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	// dropped counts, per stream, the bytes not delivered on events since its last marker.
	// Only the feed's writer touches it (it is the one sender on events).
	dropped [3]int64

	// Set once before done is closed.
	res ExecResult
	err error
}

// eventBuffer is how many chunks may wait for the reader of Events; past that, chunks are
// dropped from Events (never from the result) rather than holding the command back.
// markerSlots of them are kept for the markers that say so.
const (
	eventBuffer = 64
	markerSlots = 2
)

// ProcessFeed is the backend's side of a Process: one goroutine delivers the output, watches
// Stopped, and calls Finish once.
type ProcessFeed struct{ p *Process }

// NewProcess returns a running Process and the feed its backend drives it with.
func NewProcess() (*Process, *ProcessFeed) {
	p := &Process{
		events: make(chan Event, eventBuffer),
		done:   make(chan struct{}),
		stop:   make(chan struct{}),
	}
	return p, &ProcessFeed{p: p}
}

// Deliver puts a chunk on Events if there is room for it beside the marker slots, and
// otherwise counts it as dropped. It never blocks. Only one goroutine may call it.
func (f *ProcessFeed) Deliver(kind StreamKind, b []byte) {
	p := f.p
	p.flushDropped()
	if p.dropped[Stdout] == 0 && p.dropped[Stderr] == 0 && len(p.events) < cap(p.events)-markerSlots {
		p.events <- Event{Stream: kind, Data: bytes.Clone(b)}
		return
	}
	p.dropped[kind] += int64(len(b))
}

// Stopped is closed when Kill was called: the backend kills the command.
func (f *ProcessFeed) Stopped() <-chan struct{} { return f.p.stop }

// Finish ends the output and records the command's result; nothing may be delivered after it.
func (f *ProcessFeed) Finish(res ExecResult, err error) {
	p := f.p
	p.flushDropped()
	close(p.events)
	p.res, p.err = res, err
	close(p.done)
}

// Events delivers the output chunks in the order the backend sent them, and is closed when
// the output has ended.
func (p *Process) Events() <-chan Event { return p.events }

// Done is closed when the command has finished and Wait no longer blocks.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the command has finished and returns its result, as Exec would. After
// Kill, the result is the killed command's (exit code 137) with a nil error.
func (p *Process) Wait() (ExecResult, error) {
	<-p.done
	return p.res, p.err
}

// Poll returns nil while the command runs, and its exit code once it has finished.
func (p *Process) Poll() *int {
	select {
	case <-p.done:
		code := p.res.ExitCode
		return &code
	default:
		return nil
	}
}

// Kill kills the command and every process it started, and waits until that is done or ctx
// ends. Killing a finished command does nothing.
func (p *Process) Kill(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushDropped sends the markers of dropped output that fit, so that a reader sees each gap
// before any later chunk.
func (p *Process) flushDropped() {
	for _, k := range []StreamKind{Stdout, Stderr} {
		if p.dropped[k] > 0 && len(p.events) < cap(p.events) {
			p.events <- Event{Stream: k, Dropped: p.dropped[k]}
			p.dropped[k] = 0
		}
	}
}
