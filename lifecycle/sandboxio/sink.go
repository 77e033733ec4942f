package sandboxio

import (
	"bytes"
	"io"
)

// sinkError is a caller's writer that failed: the stream stops (as with errStop) and the
// call reports the writer's own error.
type sinkError struct {
	stream string
	err    error
}

func (e *sinkError) Error() string        { return "write " + e.stream + ": " + e.err.Error() }
func (e *sinkError) Unwrap() error        { return e.err }
func (e *sinkError) Is(target error) bool { return target == errStop }

// guardedWriter passes each write to a caller's writer without letting that writer hold the
// exec past its end: when abort closes (a timeout, a cancelled ctx, a Kill), a write still
// blocked in w returns errStop at once, so the output copier and the call return. The write
// in progress then finishes on its own goroutine, whenever w lets it.
type guardedWriter struct {
	w io.Writer
	// stream names the output in the error of a failing w ("stdout"); "" passes the error on
	// as is.
	stream string
	abort  <-chan struct{}
}

type writeResult struct {
	n   int
	err error
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	select {
	case <-g.abort:
		return 0, errStop
	default:
	}
	// A copy: the copier reuses p as soon as this returns, which it may do before w is done.
	b := bytes.Clone(p)
	res := make(chan writeResult, 1)
	go func() {
		n, err := g.w.Write(b)
		res <- writeResult{n, err}
	}()
	select {
	case r := <-res:
		if r.err == nil && r.n < len(p) {
			r.err = io.ErrShortWrite
		}
		if r.err != nil && g.stream != "" {
			return r.n, &sinkError{stream: g.stream, err: r.err}
		}
		if r.err != nil {
			return r.n, r.err
		}
		return r.n, nil
	case <-g.abort:
		return 0, errStop
	}
}

// teeWriter writes to the tail kept for the result, then to the caller's writer.
type teeWriter struct {
	tail io.Writer
	sink io.Writer
}

func (t *teeWriter) Write(p []byte) (int, error) {
	_, terr := t.tail.Write(p)
	if _, err := t.sink.Write(p); err != nil {
		return 0, err
	}
	return len(p), terr
}

// withSink returns tail, or tail teeing into w (guarded by abort) when w is set.
func withSink(tail io.Writer, w io.Writer, stream string, abort <-chan struct{}) io.Writer {
	if w == nil {
		return tail
	}
	return &teeWriter{tail: tail, sink: &guardedWriter{w: w, stream: stream, abort: abort}}
}
