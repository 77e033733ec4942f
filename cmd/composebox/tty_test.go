package main

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestExecTTY drives `exec -it` through a real pseudo-terminal, as a person at a terminal
// would: the command's tty is a /dev/pts one, the window's size reaches it and follows a
// change, and the shell's exit code comes back.
func TestExecTTY(t *testing.T) {
	o := newLib(t)
	p := samples(t, o, uniqueTask("tty"), keepAlive, 1)[0].Project()

	// -t alone, stdout not a terminal: still a pty in the container, exit code passed on.
	code, out, errOut := runCLI(t, "exec", "-t", "-p", p, "sh", "-c", "tty; exit 5")
	if code != 5 || !regexp.MustCompile(`^/dev/pts/\d+\r\n$`).MatchString(out) {
		t.Errorf("exec -t: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	if err := pty.Setsize(slave, &pty.Winsize{Rows: 40, Cols: 123}); err != nil {
		t.Fatal(err)
	}
	var screen syncBuffer
	go func() { _, _ = io.Copy(&screen, master) }()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"exec", "-it", "-p", p, "sh"}, slave, slave, slave) }()
	see := func(what string, re *regexp.Regexp) {
		t.Helper()
		if !poll(20*time.Second, func() bool { return re.MatchString(screen.String()) }) {
			t.Fatalf("%s: the terminal never showed %s:\n%q", what, re, screen.String())
		}
	}
	if _, err := master.WriteString("tty\n"); err != nil {
		t.Fatal(err)
	}
	see("tty", regexp.MustCompile(`/dev/pts/\d+\r\n`))
	// Engine API 1.41 sizes an exec's terminal only after it has started, so a command that
	// asks at once may see none yet: ask until the first size shows.
	if !poll(20*time.Second, func() bool {
		_, _ = master.WriteString("stty size\n")
		return strings.Contains(screen.String(), "40 123\r\n")
	}) {
		t.Fatalf("the terminal's size never reached the command:\n%q", screen.String())
	}
	// The window changes: the terminal says so with SIGWINCH, and the new size follows.
	if err := pty.Setsize(slave, &pty.Winsize{Rows: 50, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	if !poll(20*time.Second, func() bool {
		_, _ = master.WriteString("stty size\n")
		return strings.Contains(screen.String(), "50 100\r\n")
	}) {
		t.Fatalf("the new size never reached the command:\n%q", screen.String())
	}
	if _, err := master.WriteString("exit 3\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 3 {
			t.Errorf("exec -it: exit %d, want 3\n%q", code, screen.String())
		}
	case <-ctx.Done():
		t.Fatalf("exec -it did not end after exit:\n%q", screen.String())
	}
}
