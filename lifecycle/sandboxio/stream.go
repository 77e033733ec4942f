package sandboxio

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

// Event is one chunk of output, as the engine delivered it.
type Event struct {
	Stream StreamKind
	Data   []byte // owned by the receiver
}

// Process is a command started by ExecStream. Its methods are safe for concurrent use.
type Process struct {
	events   chan Event
	done     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	halted   chan struct{}
	haltOnce sync.Once

	// Set once before done is closed.
	res ExecResult
	err error
}

// eventBuffer is how many chunks may wait for the reader of Events before the command's
// output is held back (and the command blocks on a full pipe, as it would on a terminal).
const eventBuffer = 64

// ExecStream starts req and returns at once; the output arrives on Events as the command
// writes it. It fails synchronously (ErrUnavailable, ...) when the command cannot be
// started. Cancelling ctx, or req.Timeout passing, kills the command and every process it
// started, as Exec does. Wait returns what Exec would have.
//
// Read Events until it is closed (then call Wait), or call Kill: like a pipe from os/exec,
// an unread Events channel eventually stalls the command.
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
		halted: make(chan struct{}),
	}
	stdout, stderr := newTailBuffer(limit, req.StrictLimit), newTailBuffer(limit, req.StrictLimit)
	spec.stdout = &eventSink{p: p, kind: Stdout, tail: stdout}
	spec.stderr = &eventSink{p: p, kind: Stderr, tail: stderr}
	spec.stop = p.stop
	spec.halt = func() { p.haltOnce.Do(func() { close(p.halted) }) }
	e, err := start(ctx, t, spec, op)
	if err != nil {
		return nil, err
	}
	go func() {
		o, err := e.wait(ctx, op)
		// wait returns only after the demultiplexer stopped: nothing sends on events now.
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

// eventSink keeps the tail of one stream, as Exec does, and forwards each chunk to Events.
type eventSink struct {
	p    *Process
	kind StreamKind
	tail *tailBuffer
}

func (s *eventSink) Write(b []byte) (int, error) {
	if _, err := s.tail.Write(b); err != nil {
		return len(b), err
	}
	select {
	case s.p.events <- Event{Stream: s.kind, Data: bytes.Clone(b)}:
	case <-s.p.halted:
		// The command is being killed: nobody may be reading any more.
	}
	return len(b), nil
}
