package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxJSONBody+s.opts.MaxExecInput+1)
	br := bufio.NewReader(body)
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
	// The library takes stdin whole, so it is read before the command starts, within a bound.
	stdin, err := io.ReadAll(io.LimitReader(br, s.opts.MaxExecInput+1))
	if err != nil {
		return invalid(fmt.Sprintf("exec stream: read stdin: %v", err))
	}
	if int64(len(stdin)) > s.opts.MaxExecInput {
		return invalid(fmt.Sprintf("exec stream: stdin exceeds %d bytes", s.opts.MaxExecInput))
	}
	req.Input = stdin
	lreq, err := req.library()
	if err != nil {
		return err
	}
	p, err := sb.ExecStream(r.Context(), lreq)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := newStreamWriter(w, s.opts.WriteTimeout)
	defer out.clear()
	for ev := range p.Events() {
		typ := "stdout"
		if ev.Stream == orchestrator.StreamStderr {
			typ = "stderr"
		}
		if err := out.event(StreamEvent{Type: typ, Data: ev.Data}); err != nil {
			// The client stopped reading or went away: the command must not wait for it.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
			_ = p.Kill(ctx)
			cancel()
			s.log.Info("exec stream cut", "project", sb.Project(), "service", sb.Service(), "err", err)
			return nil
		}
	}
	res, err := p.Wait()
	if err != nil {
		body := errorBody(err)
		_ = out.event(StreamEvent{Type: "error", Error: &body})
		return nil
	}
	code := res.ExitCode
	_ = out.event(StreamEvent{Type: "exit", ExitCode: &code, StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes, DurationSeconds: res.Duration.Seconds()})
	return nil
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
