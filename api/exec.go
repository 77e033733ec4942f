package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// ExecRequest is the body of an exec (without Input: the first line of a streamed exec).
type ExecRequest struct {
	Cmd            []string          `json:"cmd"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	User           string            `json:"user,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	OutputLimit    int               `json:"output_limit,omitempty"`
	StrictLimit    bool              `json:"strict_limit,omitempty"`
	// Input is stdin; encoding/json carries it as base64.
	Input []byte `json:"input,omitempty"`
}

// ExecResult is a finished command; output is base64 in JSON, since it may be any bytes.
type ExecResult struct {
	ExitCode        int     `json:"exit_code"`
	Stdout          []byte  `json:"stdout"`
	Stderr          []byte  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	StdoutBytes     int64   `json:"stdout_bytes"`
	StderrBytes     int64   `json:"stderr_bytes"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// StreamEvent is one line of a streamed exec's response.
type StreamEvent struct {
	Type            string  `json:"type"`
	Data            []byte  `json:"data,omitempty"`
	ExitCode        *int    `json:"exit_code,omitempty"`
	StdoutTruncated bool    `json:"stdout_truncated,omitempty"`
	StderrTruncated bool    `json:"stderr_truncated,omitempty"`
	StdoutBytes     int64   `json:"stdout_bytes,omitempty"`
	StderrBytes     int64   `json:"stderr_bytes,omitempty"`
	DurationSeconds float64 `json:"duration_seconds,omitempty"`
	Error           *Error  `json:"error,omitempty"`
}

func execResultOf(r orchestrator.ExecResult) ExecResult {
	out := ExecResult{ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr,
		StdoutTruncated: r.StdoutTruncated, StderrTruncated: r.StderrTruncated,
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes, DurationSeconds: r.Duration.Seconds()}
	if out.Stdout == nil {
		out.Stdout = []byte{}
	}
	if out.Stderr == nil {
		out.Stderr = []byte{}
	}
	return out
}

func (req ExecRequest) library() (orchestrator.ExecRequest, error) {
	if req.TimeoutSeconds < 0 {
		return orchestrator.ExecRequest{}, invalid("exec: timeout_seconds is negative")
	}
	if req.OutputLimit < 0 {
		return orchestrator.ExecRequest{}, invalid("exec: output_limit is negative")
	}
	return orchestrator.ExecRequest{Cmd: req.Cmd, Stdin: req.Input, Cwd: req.Cwd, Env: req.Env, User: req.User,
		Timeout: seconds(req.TimeoutSeconds), OutputLimit: req.OutputLimit, StrictLimit: req.StrictLimit}, nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	var req ExecRequest
	// Room for the input in base64 besides the rest of the request.
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody+s.opts.MaxExecInput/3*4+4, false); err != nil {
		return err
	}
	if int64(len(req.Input)) > s.opts.MaxExecInput {
		return invalid(fmt.Sprintf("exec: input exceeds %d bytes", s.opts.MaxExecInput))
	}
	lreq, err := req.library()
	if err != nil {
		return err
	}
	res, err := sb.Exec(r.Context(), lreq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, execResultOf(res))
	return nil
}

// readLine reads one line of at most max bytes (the newline excluded).
func readLine(br *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if int64(len(line)) > max+1 {
			return nil, invalid(fmt.Sprintf("exec stream: the request line exceeds %d bytes", max))
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return line, nil
		default:
			return nil, invalid(fmt.Sprintf("exec stream: read the request: %v", err))
		}
	}
}

func (s *Server) execStream(w http.ResponseWriter, r *http.Request) error {
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	// Stdin streams from the request body while the output streams into the response.
	_ = http.NewResponseController(w).EnableFullDuplex()
	br := bufio.NewReader(r.Body)
	line, err := readLine(br, s.opts.MaxJSONBody)
	if err != nil {
		return err
	}
	var req ExecRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return invalid(fmt.Sprintf("exec stream: request line: %v", err))
	}
	if req.Input != nil {
		return invalid("exec stream: input goes after the request line, as raw bytes, not in it")
	}
	lreq, err := req.library()
	if err != nil {
		return err
	}
	out := &eventWriter{sw: newStreamWriter(w, s.opts.WriteTimeout)}
	defer out.sw.clear()
	lreq.StdinReader = br
	lreq.Stdout = &streamSink{out: out, typ: "stdout"}
	lreq.Stderr = &streamSink{out: out, typ: "stderr"}
	res, err := sb.Exec(r.Context(), lreq)
	if err != nil {
		if !out.started() {
			// Nothing was sent yet: an ordinary error answer.
			return err
		}
		if out.failed() {
			// The client stopped reading or went away; the library has stopped the command.
			s.log.Info("exec stream cut", "project", sb.Project(), "service", sb.Service(), "err", err)
			return nil
		}
		body := errorBody(err)
		_ = out.event(StreamEvent{Type: "error", Error: &body})
		return nil
	}
	code := res.ExitCode
	_ = out.event(StreamEvent{Type: "exit", ExitCode: &code, StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes, DurationSeconds: res.Duration.Seconds()})
	return nil
}

// eventWriter sends a streamed exec's events: the status line with the first one, then one
// NDJSON line each. The library writes stdout and stderr from its own goroutines, hence the
// lock. A failed write (a client that stopped reading past the deadline, or went away) fails
// every later one, which stops the command.
type eventWriter struct {
	mu    sync.Mutex
	sw    *streamWriter
	begun bool
	err   error
}

func (e *eventWriter) event(v StreamEvent) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if !e.begun {
		e.begun = true
		e.sw.w.Header().Set("Content-Type", "application/x-ndjson")
		e.sw.w.WriteHeader(http.StatusOK)
	}
	e.err = e.sw.event(v)
	return e.err
}

// begin sends the status line and headers now, for a stream whose first event may be long in
// coming (a followed log): the client then knows the request was accepted.
func (e *eventWriter) begin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.begun {
		e.begun = true
		e.sw.w.Header().Set("Content-Type", "application/x-ndjson")
		e.sw.w.WriteHeader(http.StatusOK)
		e.err = e.sw.rc.Flush()
	}
	return e.err
}

func (e *eventWriter) started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.begun
}

func (e *eventWriter) failed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err != nil
}

// streamSink is one output stream of a streamed exec, as an io.Writer for the library.
type streamSink struct {
	out *eventWriter
	typ string
}

func (s *streamSink) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if err := s.out.event(StreamEvent{Type: s.typ, Data: b}); err != nil {
		return 0, err
	}
	return len(b), nil
}

// streamWriter writes NDJSON lines, each flushed at once and with a write deadline, so that a
// client that stops reading fails the write instead of blocking it forever.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	enc     *json.Encoder
}

func newStreamWriter(w http.ResponseWriter, timeout time.Duration) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: timeout, enc: json.NewEncoder(w)}
}

// clear drops the write deadline, which would otherwise stay on the connection and fail the
// next request it carries.
func (sw *streamWriter) clear() { _ = sw.rc.SetWriteDeadline(time.Time{}) }

func (sw *streamWriter) event(v any) error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if err := sw.enc.Encode(v); err != nil {
		return err
	}
	return sw.rc.Flush()
}
