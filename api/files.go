package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// holdback is how much of a body is held before the response starts, so that a failure within
// it (a small file over its limit) is still an error response.
const holdback = 64 << 10

// deferredWriter sends the response's status and headers only once the body passes holdback
// bytes or ends, so that an error found before (a missing file, a limit passed early) can still
// be an error response. Every write carries a deadline: a client that stops reading fails the
// copy instead of pinning the command that produces it.
type deferredWriter struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	contentType string
	timeout     time.Duration
	held        []byte
	started     bool
}

func newDeferredWriter(w http.ResponseWriter, contentType string, timeout time.Duration) *deferredWriter {
	return &deferredWriter{w: w, rc: http.NewResponseController(w), contentType: contentType, timeout: timeout}
}

func (d *deferredWriter) Write(b []byte) (int, error) {
	if !d.started && len(d.held)+len(b) <= holdback {
		d.held = append(d.held, b...)
		return len(b), nil
	}
	if err := d.start(); err != nil {
		return 0, err
	}
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.w.Write(b)
}

// start sends the status, the headers and what was held.
func (d *deferredWriter) start() error {
	if d.started {
		return nil
	}
	d.started = true
	d.w.Header().Set("Content-Type", d.contentType)
	d.w.WriteHeader(http.StatusOK)
	if len(d.held) == 0 {
		return nil
	}
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	_, err := d.w.Write(d.held)
	d.held = nil
	return err
}

// finish ends the response. On a failure once the response has started, the connection is
// cut, so that the client cannot take a truncated body for a whole one.
func (d *deferredWriter) finish(err error) error {
	// The write deadline would otherwise stay on the connection and fail its next request.
	defer func() { _ = d.rc.SetWriteDeadline(time.Time{}) }()
	if err == nil {
		_ = d.start()
		return nil
	}
	if !d.started {
		return err
	}
	panic(http.ErrAbortHandler)
}

func pathParam(r *http.Request, op string) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", invalid(op + ": the path query parameter is required")
	}
	return p, nil
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r, "read file")
	if err != nil {
		return err
	}
	limit := int64(orchestrator.DefaultReadLimit)
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n <= 0 || n > orchestrator.DefaultReadLimit {
			return invalid(fmt.Sprintf("read file %s: limit %q: want a number of bytes from 1 to %d", path, q, orchestrator.DefaultReadLimit))
		}
		limit = n
	}
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	dw := newDeferredWriter(w, "application/octet-stream", s.opts.WriteTimeout)
	_, err = sb.ReadFileTo(r.Context(), path, dw, limit)
	return dw.finish(err)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r, "write file")
	if err != nil {
		return err
	}
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	if err := sb.WriteFileFrom(r.Context(), path, r.Body, r.ContentLength); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) readDir(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r, "read directory")
	if err != nil {
		return err
	}
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	// Directories travel as tar, made and unpacked by tar inside the container as the sandbox's
	// user (so its permissions apply, as for files), streamed both ways with no copy in between.
	dw := newDeferredWriter(w, "application/x-tar", s.opts.WriteTimeout)
	return dw.finish(sb.ReadDirTo(r.Context(), path, dw))
}

func (s *Server) writeDir(w http.ResponseWriter, r *http.Request) error {
	path, err := pathParam(r, "write directory")
	if err != nil {
		return err
	}
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	if err := sb.WriteDirFrom(r.Context(), path, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
