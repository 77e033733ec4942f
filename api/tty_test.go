package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// ttyClient is the client's side of a terminal session, spoken on the wire.
type ttyClient struct {
	conn net.Conn
	mu   sync.Mutex
	out  bytes.Buffer
	end  *StreamEvent
	done chan struct{}
}

// openTTY asks for a terminal session and returns the switched connection, or the error
// answer when the server refused it.
func (ts *testServer) openTTY(t *testing.T, path string, header map[string]string, req TTYRequest) (*ttyClient, *response) {
	t.Helper()
	conn, err := net.Dial("unix", ts.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	body, _ := json.Marshal(req)
	hreq, _ := http.NewRequest("POST", ts.base+path, bytes.NewReader(body))
	for k, v := range header {
		hreq.Header.Set(k, v)
	}
	if err := hreq.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, hreq)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		return nil, &response{status: resp.StatusCode, body: b, header: resp.Header}
	}
	if resp.Header.Get("Upgrade") != TTYProtocol {
		t.Fatalf("101 with Upgrade %q", resp.Header.Get("Upgrade"))
	}
	c := &ttyClient{conn: conn, done: make(chan struct{})}
	go c.read(br)
	return c, nil
}

// read collects output frames until the end frame.
func (c *ttyClient) read(r io.Reader) {
	defer close(c.done)
	var hdr [frameHeaderSize]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		payload := make([]byte, binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		c.mu.Lock()
		switch hdr[0] {
		case FrameOutput:
			c.out.Write(payload)
		case FrameEnd:
			var ev StreamEvent
			_ = json.Unmarshal(payload, &ev)
			c.end = &ev
		}
		c.mu.Unlock()
		if hdr[0] == FrameEnd {
			return
		}
	}
}

func (c *ttyClient) send(t *testing.T, kind byte, payload []byte) {
	t.Helper()
	buf := make([]byte, frameHeaderSize+len(payload))
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[4:frameHeaderSize], uint32(len(payload)))
	copy(buf[frameHeaderSize:], payload)
	if _, err := c.conn.Write(buf); err != nil {
		t.Fatal(err)
	}
}

func (c *ttyClient) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// wait returns the end frame.
func (c *ttyClient) wait(t *testing.T) StreamEvent {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("no end frame; output so far %q", c.output())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end == nil {
		t.Fatalf("the stream ended without an end frame; output %q", c.out.String())
	}
	return *c.end
}

// TestExecTTY runs a shell on a terminal through the upgrade: tty names a pseudo-terminal, a
// resize frame reaches stty, keystrokes reach the shell, and its exit code comes back in the
// end frame. Another lease's request, and one without the upgrade, are refused before any
// switch.
func TestExecTTY(t *testing.T) {
	ts := startServer(t, Options{})
	lease := ts.lease(t)
	hdr := map[string]string{leaseHeader: lease, "Connection": "Upgrade", "Upgrade": TTYProtocol}
	task := ts.task(t, lease, TaskRequest{Name: uniqueName("tty"), ComposeYAML: keepAlive})
	sm := ts.sample(t, lease, task.ID, SampleRequest{})
	path := "/v1/samples/" + sm.Project + "/sandboxes/default/exec/tty"
	script := `tty; while read x; do [ "$x" = q ] && exit 5; stty size; done`
	req := TTYRequest{Cmd: []string{"sh", "-c", script}, Rows: 30, Cols: 90}

	// Another lease does not see the sample; a request without the upgrade is invalid.
	other := ts.lease(t)
	if _, refused := ts.openTTY(t, path, map[string]string{leaseHeader: other, "Connection": "Upgrade", "Upgrade": TTYProtocol}, req); refused == nil {
		t.Fatal("another lease got a terminal session")
	} else {
		refused.wantError(t, http.StatusNotFound, "not_found")
	}
	if _, refused := ts.openTTY(t, path, map[string]string{leaseHeader: lease}, req); refused == nil {
		t.Fatal("a request without Upgrade got a terminal session")
	} else if e := refused.wantError(t, http.StatusBadRequest, "invalid_config"); !strings.Contains(e.Message, TTYProtocol) {
		t.Fatalf("the refusal does not name the protocol: %s", e.Message)
	}

	c, refused := ts.openTTY(t, path, hdr, req)
	if refused != nil {
		t.Fatalf("open session: %d %s", refused.status, refused.body)
	}
	pts := regexp.MustCompile(`/dev/pts/\d+`)
	eventually(t, 30*time.Second, "tty names a pseudo-terminal", func() bool { return pts.MatchString(c.output()) })

	// The first size reaches the terminal...
	c.send(t, FrameStdin, []byte("\n"))
	eventually(t, 30*time.Second, "stty size 30 90", func() bool { return strings.Contains(c.output(), "30 90") })
	// ...and so does a resize, once the engine has passed it on.
	sz, _ := json.Marshal(TTYResize{Rows: 41, Cols: 133})
	c.send(t, FrameResize, sz)
	eventually(t, 30*time.Second, "stty size 41 133", func() bool {
		c.send(t, FrameStdin, []byte("\n"))
		return strings.Contains(c.output(), "41 133")
	})
	c.send(t, FrameStdin, []byte("q\n"))
	end := c.wait(t)
	if end.Type != "exit" || end.ExitCode == nil || *end.ExitCode != 5 || end.StdoutBytes == 0 {
		t.Fatalf("end frame = %+v; output %q", end, c.output())
	}
	// The terminal's line endings: output arrives as a terminal writes it.
	if !strings.Contains(c.output(), "\r\n") {
		t.Fatalf("no CRLF in terminal output %q", c.output())
	}
}

// TestExecTTYClientGone closes the connection under a running command: the command is killed,
// which the next exec in the container shows.
func TestExecTTYClientGone(t *testing.T) {
	ts := startServer(t, Options{})
	lease := ts.lease(t)
	hdr := map[string]string{leaseHeader: lease, "Connection": "Upgrade", "Upgrade": TTYProtocol}
	task := ts.task(t, lease, TaskRequest{Name: uniqueName("ttygone"), ComposeYAML: keepAlive})
	sm := ts.sample(t, lease, task.ID, SampleRequest{})
	sb := "/v1/samples/" + sm.Project + "/sandboxes/default"
	c, refused := ts.openTTY(t, sb+"/exec/tty", hdr, TTYRequest{Cmd: []string{"sh", "-c", "echo up; exec sleep 3600"}})
	if refused != nil {
		t.Fatalf("open session: %d %s", refused.status, refused.body)
	}
	sleeps := func() string {
		// No pgrep in the base image: count the processes named sleep from /proc.
		r := ts.do(t, "POST", sb+"/exec", jsonBody(t, ExecRequest{Cmd: []string{"sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$'"}}), map[string]string{leaseHeader: lease})
		var res ExecResult
		r.json(t, &res)
		return string(res.Stdout)
	}
	eventually(t, 30*time.Second, "the command started", func() bool { return strings.Contains(c.output(), "up") && sleeps() == "1\n" })
	_ = c.conn.Close()
	eventually(t, 30*time.Second, "the command is killed", func() bool { return sleeps() == "0\n" })
}
