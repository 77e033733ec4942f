package api

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// TTYProtocol is the Upgrade token of a terminal session: the client asks for it, and after
// 101 Switching Protocols the connection carries frames both ways until the command ends.
const TTYProtocol = "composebox-tty"

// Frames of a terminal session. Each is an 8-byte header, kind then three zero bytes then the
// payload's length as a big-endian uint32, as in the engine's attach stream, then the payload.
const (
	// From the client.
	FrameStdin  byte = 0 // keystrokes for the terminal
	FrameResize byte = 1 // JSON {"rows": R, "cols": C}
	FrameEOF    byte = 2 // closes the command's stdin; no payload
	// From the server.
	FrameOutput byte = 1 // what the command wrote to its terminal
	FrameEnd    byte = 3 // a JSON StreamEvent of type exit or error, the last frame

	frameHeaderSize = 8
	// MaxFrame bounds a frame's payload, both ways.
	MaxFrame = 1 << 20
	// ttyKeep is the output a session's result keeps in memory: the frames carry all of it, so
	// the library's tail only needs to exist.
	ttyKeep = 4 << 10
)

// TTYRequest is the body of a terminal session's request.
type TTYRequest struct {
	Cmd            []string          `json:"cmd"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	User           string            `json:"user,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	// Rows and Cols are the terminal's first size (zero: the engine's default).
	Rows uint `json:"rows,omitempty"`
	Cols uint `json:"cols,omitempty"`
}

// TTYResize is the payload of a FrameResize.
type TTYResize struct {
	Rows uint `json:"rows"`
	Cols uint `json:"cols"`
}

// errClientGone ends a session whose client closed its connection (or broke the framing).
var errClientGone = errors.New("the client closed the terminal session")

// upgradeAsked reports whether r asks to switch to the terminal protocol.
func upgradeAsked(r *http.Request) bool {
	conn := false
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			conn = conn || strings.EqualFold(strings.TrimSpace(tok), "upgrade")
		}
	}
	return conn && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), TTYProtocol)
}

// execTTY runs a command on a terminal over an upgraded connection. Everything that can be
// refused (ownership, the request, the upgrade itself) is an ordinary error answer; once
// switched, the command's end, or its failure, is the last frame.
func (s *Server) execTTY(w http.ResponseWriter, r *http.Request) error {
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	if !upgradeAsked(r) {
		return invalid(r.Method + " " + r.URL.Path + ": a terminal session needs the headers Connection: Upgrade and Upgrade: " + TTYProtocol)
	}
	var req TTYRequest
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, false); err != nil {
		return err
	}
	if req.TimeoutSeconds < 0 {
		return invalid("exec tty: timeout_seconds is negative")
	}
	resize := make(chan orchestrator.WindowSize, 1)
	stdin, stdinW := io.Pipe()
	defer stdin.Close()
	lreq := orchestrator.ExecRequest{Cmd: req.Cmd, Env: req.Env, Cwd: req.Cwd, User: req.User,
		Timeout: seconds(req.TimeoutSeconds), TTY: true, Size: orchestrator.WindowSize{Rows: req.Rows, Cols: req.Cols},
		Resize: resize, StdinReader: stdin, OutputLimit: ttyKeep}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return fmt.Errorf("exec tty: take over the connection: %w", err)
	}
	defer conn.Close()
	// The server's read and write deadlines are for requests, not for a session.
	_ = conn.SetDeadline(time.Time{})
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + TTYProtocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// A stopping server ends its sessions, as it ends its other endless streams.
	go func() {
		select {
		case <-s.done:
			cancel(&serverError{kind: "unavailable", msg: "exec tty: the server is stopping"})
		case <-ctx.Done():
		}
	}()
	go readFrames(brw.Reader, stdinW, resize, cancel)
	out := &frameWriter{conn: conn, timeout: s.opts.WriteTimeout}
	lreq.Stdout = out
	res, err := sb.Exec(ctx, lreq)
	var end StreamEvent
	switch {
	case err != nil && out.failed():
		s.log.Info("terminal session cut", "project", sb.Project(), "service", sb.Service(), "err", err)
		return nil
	case err != nil:
		// A session ended by its connection (closed, a broken frame) or by a stopping server
		// says why, keeping the killed command's result.
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		body := errorBody(err)
		end = StreamEvent{Type: "error", Error: &body}
	default:
		code := res.ExitCode
		end = StreamEvent{Type: "exit", ExitCode: &code, StdoutBytes: res.StdoutBytes, DurationSeconds: res.Duration.Seconds()}
	}
	b, _ := json.Marshal(end)
	_ = out.frame(FrameEnd, b)
	return nil
}

// readFrames reads the client's frames until its connection ends: keystrokes into stdin, sizes
// onto the resize hook (only the latest one pending is kept). A closed connection or a broken
// frame ends the session, which kills the command.
func readFrames(r io.Reader, stdin *io.PipeWriter, resize chan orchestrator.WindowSize, cancel context.CancelCauseFunc) {
	fail := func(err error) {
		_ = stdin.CloseWithError(err)
		cancel(err)
	}
	var hdr [frameHeaderSize]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			fail(errClientGone)
			return
		}
		n := binary.BigEndian.Uint32(hdr[4:])
		if n > MaxFrame {
			fail(invalid(fmt.Sprintf("exec tty: a frame of %d bytes exceeds %d", n, MaxFrame)))
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			fail(errClientGone)
			return
		}
		switch hdr[0] {
		case FrameStdin:
			// Blocks while the command does not read, as a full pipe does; fails once stdin
			// is closed, and the keystrokes then have nowhere to go.
			_, _ = stdin.Write(payload)
		case FrameResize:
			var sz TTYResize
			if err := json.Unmarshal(payload, &sz); err != nil {
				fail(invalid(fmt.Sprintf("exec tty: resize frame: %v", err)))
				return
			}
			select {
			case <-resize:
			default:
			}
			resize <- orchestrator.WindowSize{Rows: sz.Rows, Cols: sz.Cols}
		case FrameEOF:
			_ = stdin.Close()
		default:
			fail(invalid(fmt.Sprintf("exec tty: unknown frame kind %d", hdr[0])))
			return
		}
	}
}

// frameWriter writes a session's frames, each with a write deadline, so that a client that
// stops reading fails the write (which stops the command) instead of blocking it forever.
type frameWriter struct {
	mu      sync.Mutex
	conn    net.Conn
	timeout time.Duration
	err     error
}

// Write sends b as output frames.
func (f *frameWriter) Write(b []byte) (int, error) {
	for done := 0; done < len(b); {
		n := min(len(b)-done, MaxFrame)
		if err := f.frame(FrameOutput, b[done:done+n]); err != nil {
			return done, err
		}
		done += n
	}
	return len(b), nil
}

func (f *frameWriter) frame(kind byte, payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	buf := make([]byte, frameHeaderSize+len(payload))
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[4:frameHeaderSize], uint32(len(payload)))
	copy(buf[frameHeaderSize:], payload)
	_ = f.conn.SetWriteDeadline(time.Now().Add(f.timeout))
	_, f.err = f.conn.Write(buf)
	return f.err
}

func (f *frameWriter) failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err != nil
}
