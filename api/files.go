package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
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

// Directories travel as tar, made and unpacked by tar inside the container, as the sandbox's
// user (so its permissions apply, as for files).
const (
	// dirCheck exits 3 when the directory is missing and 4 when it is not a directory.
	dirCheck = `test -e "$1" || exit 3; test -d "$1" || exit 4`
	// dirExtract unpacks the uploaded archive $2 into $1, creating it, and removes the archive.
	dirExtract = `mkdir -p "$1" && tar -x -f "$2" -C "$1"; rc=$?; rm -f "$2"; exit $rc`
	// dirTail is how much of tar's output a stream keeps besides sending it: only a tail for
	// the error message is needed.
	dirTail = 64 << 10
)

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
	op := fmt.Sprintf("read directory %s in %s", path, sb.Service())
	res, err := sb.Exec(r.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", dirCheck, "sh", path}})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch res.ExitCode {
	case 0:
	case 3:
		return errdefs.New(errdefs.ErrNotFound, op+": no such directory")
	case 4:
		return errdefs.New(errdefs.ErrInvalidConfig, op+": not a directory")
	default:
		return commandError(op, "sh", res)
	}
	p, err := sb.ExecStream(r.Context(), orchestrator.ExecRequest{Cmd: []string{"tar", "-c", "-f", "-", "-C", path, "."}, OutputLimit: dirTail})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	dw := newDeferredWriter(w, "application/x-tar", s.opts.WriteTimeout)
	var werr error
	for ev := range p.Events() {
		if ev.Stream != orchestrator.StreamStdout || werr != nil {
			continue
		}
		if _, werr = dw.Write(ev.Data); werr != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
			_ = p.Kill(ctx)
			cancel()
		}
	}
	res, err = p.Wait()
	switch {
	case werr != nil:
		err = werr
	case err == nil && res.ExitCode != 0:
		err = commandError(op, "tar", res)
	case err != nil:
		err = fmt.Errorf("%s: %w", op, err)
	}
	return dw.finish(err)
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
	op := fmt.Sprintf("write directory %s in %s", path, sb.Service())
	// The archive is streamed into a file of the container first: the library takes an exec's
	// stdin whole, a file streams.
	tmp := "/tmp/.composebox-upload-" + newID("") + ".tar"
	if err := sb.WriteFileFrom(r.Context(), tmp, r.Body, r.ContentLength); err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		_, _ = sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"rm", "-f", tmp}})
		cancel()
		return fmt.Errorf("%s: upload: %w", op, err)
	}
	res, err := sb.Exec(r.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", dirExtract, "sh", path, tmp}})
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if res.ExitCode != 0 {
		return commandError(op, "tar", res)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// commandError is a helper command that failed: a permission problem when its message says so,
// else a missing tool (exit 126/127), else an internal error with its output.
func commandError(op, tool string, res orchestrator.ExecResult) error {
	msg := fmt.Sprintf("%s: %s exited %d: %s", op, tool, res.ExitCode, res.StderrText())
	switch {
	case res.ExitCode == 126 || res.ExitCode == 127:
		return errdefs.New(errdefs.ErrPrerequisite, fmt.Sprintf("%s: the container has no usable %s (exit %d)", op, tool, res.ExitCode))
	case bytesContain(res.Stderr, "Permission denied"):
		return errdefs.New(errdefs.ErrPermission, msg)
	}
	return errors.New(msg)
}

func bytesContain(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
