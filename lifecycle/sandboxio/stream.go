package sandboxio

import (
	"context"
	"io"

	"github.com/composebox/composebox/orchestrator/backend"
)

// The streaming exec's types are the backend boundary's.
type (
	StreamKind = backend.StreamKind
	Event      = backend.Event
	Process    = backend.Process
)

const (
	Stdout = backend.Stdout
	Stderr = backend.Stderr
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
	p, feed := backend.NewProcess()
	stdout, stderr := newTailBuffer(limit, req.StrictLimit), newTailBuffer(limit, req.StrictLimit)
	spec.stdout = &eventSink{feed: feed, kind: Stdout, out: withSink(stdout, req.Stdout, "stdout", spec.abort)}
	spec.stderr = &eventSink{feed: feed, kind: Stderr, out: withSink(stderr, req.Stderr, "stderr", spec.abort)}
	spec.stop = feed.Stopped()
	e, err := start(ctx, t, spec, op)
	if err != nil {
		return nil, err
	}
	go func() {
		o, err := e.wait(ctx, op)
		// wait returns only after the demultiplexer stopped: nothing sends on events now.
		feed.Finish(t.finish(ctx, req, op, o, err, stdout, stderr))
	}()
	return p, nil
}

// eventSink keeps the tail of one stream, as Exec does (and feeds the request's writer),
// and forwards each chunk to Events when there is room.
type eventSink struct {
	feed *backend.ProcessFeed
	kind StreamKind
	out  io.Writer
}

func (s *eventSink) Write(b []byte) (int, error) {
	if _, err := s.out.Write(b); err != nil {
		return len(b), err
	}
	s.feed.Deliver(s.kind, b)
	return len(b), nil
}
