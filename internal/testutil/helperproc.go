package testutil

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// HelperProcess is this test binary run again as one of its own tests: another process, which
// owns samples the way a runner does, and can end normally (its stdin closed) or be killed.
type HelperProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	done   chan struct{}
}

// StartHelper runs the test binary's test named test with env added, and waits up to timeout
// for a line of its stdout that starts with prefix, returning the rest of that line. At the
// end of the test the helper's stdin is closed, which tells it to end, and it is killed if it
// has not ended within two minutes.
func StartHelper(t testing.TB, test string, env []string, prefix string, timeout time.Duration) (*HelperProcess, string) {
	t.Helper()
	h := &HelperProcess{cmd: exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1"), done: make(chan struct{})}
	h.cmd.Env = append(os.Environ(), env...)
	h.cmd.Stderr = &h.stderr
	stdin, err := h.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdin = stdin
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// The first line with prefix is handed over; the rest are read and dropped, to the end
	// (Wait needs the pipe drained).
	found := make(chan string, 1)
	go func() {
		defer close(found)
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok && !sent {
				found <- rest
				sent = true
			}
		}
	}()
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = h.stdin.Close()
		select {
		case <-h.done:
		case <-time.After(2 * time.Minute):
			h.Kill()
		}
	})
	select {
	case rest, ok := <-found:
		if !ok {
			<-h.done
			t.Fatalf("helper %s ended before saying %q: %v\n%s", test, prefix, h.cmd.ProcessState, h.stderr.String())
		}
		return h, rest
	case <-time.After(timeout):
		h.Kill()
		t.Fatalf("helper %s did not say %q within %s\n%s", test, prefix, timeout, h.stderr.String())
	}
	return h, ""
}

// Kill kills the helper at once and waits until it is gone.
func (h *HelperProcess) Kill() {
	_ = h.cmd.Process.Kill()
	<-h.done
}
