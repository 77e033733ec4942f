package sandboxio

import (
	"bytes"
	"context"
	"io"
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

// Event is one chunk of output, as the engine delivered it, or a marker of output Events
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

// Process is a command started by ExecStream. Its methods are safe for concurrent use.
type Process struct {
	events   chan Event
	done     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	// dropped counts, per stream, the bytes not delivered on events since its last marker.
	// Only the output copier touches it (it is the one sender on events).
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

// ExecStream starts req and returns at once; the output arrives on Events as the command
// writes it. It fails synchronously (ErrUnavailable, ...) when the command cannot be
// started. Cancelling ctx, or req.Timeout passing, kills the command and every process it
// started, as Exec does. Wait returns what Exec would have.
//
// Events never blocks the command, other execs, or Poll and Wait: a reader that falls more
// than a buffer behind (or never reads) gets a marker Event with Dropped set in place of what
// it missed, and the result keeps the tail of each stream, with the truncation flags, as
// Exec's does. For every byte, in order, with backpressure, set req.Stdout and req.Stderr.
//
// One chunk may come late: a first stdout chunk of at most 4 KiB that ends in "\r\n" is
// held until the next chunk or the end, because until then it cannot be told from the
// engine's message for a command that failed to start (which goes to Stderr instead).
func ExecStream(ctx context.Context, t Target, req ExecRequest) (*Process, error) {
	op := execOp(req.Cmd)
	spec, err := t.execSpec(req, op)
	if err != nil {
		return nil, err
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	p := &Process{
		events: make(chan Event, eventBuffer),
		done:   make(chan struct{}),
		stop:   make(chan struct{}),
	}
	stdout, stderr := newTailBuffer(limit, req.StrictLimit), newTailBuffer(limit, req.StrictLimit)
	spec.stdout = &eventSink{p: p, kind: Stdout, out: withSink(stdout, req.Stdout, "stdout", spec.abort)}
	spec.stderr = &eventSink{p: p, kind: Stderr, out: withSink(stderr, req.Stderr, "stderr", spec.abort)}
	spec.stop = p.stop
	e, err := start(ctx, t, spec, op)
	if err != nil {
		return nil, err
	}
	go func() {
		o, err := e.wait(ctx, op)
		// wait returns only after the demultiplexer stopped: nothing sends on events now.
		p.flushDropped()
		close(p.events)
		p.res, p.err = t.finish(ctx, req, op, o, err, stdout, stderr)
		close(p.done)
	}()
	return p, nil
}

// Events delivers the output chunks in the order the engine sent them, and is closed when
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

// eventSink keeps the tail of one stream, as Exec does (and feeds the request's writer),
// and forwards each chunk to Events when there is room.
type eventSink struct {
	p    *Process
	kind StreamKind
	out  io.Writer
}

func (s *eventSink) Write(b []byte) (int, error) {
	if _, err := s.out.Write(b); err != nil {
		return len(b), err
	}
	s.p.deliver(s.kind, b)
	return len(b), nil
}

// deliver puts a chunk on events if there is room for it beside the marker slots, and
// otherwise counts it as dropped. Never blocking is safe to decide with len: the copier is
// the only sender, and the reader only makes room.
func (p *Process) deliver(kind StreamKind, b []byte) {
	p.flushDropped()
	if p.dropped[Stdout] == 0 && p.dropped[Stderr] == 0 && len(p.events) < cap(p.events)-markerSlots {
		p.events <- Event{Stream: kind, Data: bytes.Clone(b)}
		return
	}
	p.dropped[kind] += int64(len(b))
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
