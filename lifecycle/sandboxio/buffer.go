package sandboxio

import (
	"bytes"
	"errors"
	"io"

	"github.com/composebox/composebox/orchestrator/backend"
)

// errStop is returned by a sink to make the demultiplexer stop reading: the command is then
// killed, since nothing will read the rest of its output.
var errStop = errors.New("output sink stopped")

// tailBuffer keeps the last limit bytes written to it and counts all of them. It starts small
// and grows to limit, then turns into a ring, so that a command printing 100 MiB costs one
// copy per byte, not a memmove of the whole window per write.
type tailBuffer struct {
	limit  int
	strict bool // past the limit, fail the write (and so the exec) instead of dropping the head

	buf   []byte // holds the first limit bytes, then serves as the ring
	w     int    // next write position once full
	full  bool
	total int64
}

func newTailBuffer(limit int, strict bool) *tailBuffer {
	return &tailBuffer{limit: limit, strict: strict}
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if b.strict && b.total+int64(n) > int64(b.limit) {
		keep := int64(b.limit) - b.total
		b.total += int64(n)
		if keep > 0 {
			b.buf = append(b.buf, p[:keep]...)
		}
		return n, errStop
	}
	b.total += int64(n)
	if !b.full {
		if len(b.buf)+n <= b.limit {
			b.buf = append(b.buf, p...)
			return n, nil
		}
		ring := make([]byte, b.limit)
		b.w = copy(ring, b.buf)
		b.buf, b.full = ring, true
	}
	if n >= b.limit {
		copy(b.buf, p[n-b.limit:])
		b.w = 0
		return n, nil
	}
	c := copy(b.buf[b.w:], p)
	if c < n {
		copy(b.buf, p[c:])
	}
	b.w = (b.w + n) % b.limit
	return n, nil
}

// Bytes returns the kept bytes in order, as a fresh slice when the ring wrapped.
func (b *tailBuffer) Bytes() []byte {
	if !b.full {
		return b.buf
	}
	out := make([]byte, 0, b.limit)
	out = append(out, b.buf[b.w:]...)
	return append(out, b.buf[:b.w]...)
}

// Truncated reports whether bytes were dropped (or, when strict, refused).
func (b *tailBuffer) Truncated() bool { return b.total > int64(b.limit) }

// holdback delays the first write when it looks like the message the engine writes into the
// stdout stream when an exec cannot start (one frame ending in "\r\n"). Whether the process
// started is known only from ExecInspect after the stream ends (Pid 0 means it never ran), so
// until then that frame cannot be told from the command's own output. Any later write, or
// release, passes it on unchanged.
type holdback struct {
	w       io.Writer
	decided bool
	held    []byte
	// started, when set, is asked about a frame that looks like the engine's message: true
	// means the process runs, so the frame is its own and passes at once. A terminal ends its
	// lines in "\r\n", so without it a session's first line would wait for the next output.
	started func() bool
}

// maxStartMessage bounds what holdback keeps: the engine's start errors are a few hundred bytes.
const maxStartMessage = 4096

func (h *holdback) Write(p []byte) (int, error) {
	if !h.decided {
		h.decided = true
		if len(p) <= maxStartMessage && bytes.HasSuffix(p, []byte("\r\n")) && (h.started == nil || !h.started()) {
			h.held = bytes.Clone(p)
			return len(p), nil
		}
	}
	if err := h.release(); err != nil {
		return 0, err
	}
	return h.w.Write(p)
}

func (h *holdback) release() error {
	if h.held == nil {
		return nil
	}
	p := h.held
	h.held = nil
	_, err := h.w.Write(p)
	return err
}

// take returns the held frame without passing it on: it was the engine's, not the command's.
func (h *holdback) take() []byte {
	p := h.held
	h.held = nil
	return p
}

func decodeText(b []byte) string { return backend.DecodeText(b) }

// limitWriter passes at most limit bytes to w and then stops the stream.
type limitWriter struct {
	w     io.Writer
	limit int64 // < 0: none
	n     int64
	over  bool
	err   error // w's own failure, as opposed to the limit
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.limit >= 0 && l.n+int64(len(p)) > l.limit {
		keep := l.limit - l.n
		if keep > 0 {
			m, err := l.w.Write(p[:keep])
			l.n += int64(m)
			if err != nil {
				l.err = err
				return m, errStop
			}
		}
		l.over = true
		return int(max(keep, 0)), errStop
	}
	m, err := l.w.Write(p)
	l.n += int64(m)
	if err != nil {
		l.err = err
		return m, errStop
	}
	return m, nil
}
