package sandboxio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"
)

func TestTailBufferKeepsTail(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{1, 7, 64, 1000} {
		for trial := range 200 {
			b := newTailBuffer(limit, false)
			var all []byte
			for range r.IntN(20) {
				p := make([]byte, r.IntN(3*limit+2))
				for i := range p {
					p[i] = byte(r.Uint32())
				}
				if n, err := b.Write(p); n != len(p) || err != nil {
					t.Fatalf("write: %d, %v", n, err)
				}
				all = append(all, p...)
			}
			want := all[max(0, len(all)-limit):]
			if got := b.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("limit %d trial %d: kept %d bytes, want the last %d", limit, trial, len(got), len(want))
			}
			if b.total != int64(len(all)) || b.Truncated() != (len(all) > limit) {
				t.Fatalf("limit %d: total %d truncated %t for %d bytes", limit, b.total, b.Truncated(), len(all))
			}
		}
	}
}

func TestTailBufferStrict(t *testing.T) {
	b := newTailBuffer(10, true)
	if _, err := b.Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("67890")); err != nil {
		t.Fatal("exactly at the limit is fine:", err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, errStop) {
		t.Fatalf("past the limit: %v", err)
	}
	if string(b.Bytes()) != "1234567890" || !b.Truncated() || b.total != 11 {
		t.Fatalf("kept %q, total %d", b.Bytes(), b.total)
	}
	// A first write past the limit keeps its head.
	b = newTailBuffer(4, true)
	if _, err := b.Write([]byte("abcdefgh")); !errors.Is(err, errStop) || string(b.Bytes()) != "abcd" {
		t.Fatalf("kept %q, %v", b.Bytes(), err)
	}
}

func TestDecodeText(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"plain":             "plain",
		"é✓🚀":               "é✓🚀",
		"a\xffb":            "a\uFFFDb",
		"\xc0\x80":          "\uFFFD\uFFFD",
		"\xe2\x9c":          "\uFFFD\uFFFD", // a character cut by truncation
		"ok\x00nul":         "ok\x00nul",
		"\uFFFD is literal": "\uFFFD is literal",
	} {
		if got := decodeText([]byte(in)); got != want {
			t.Errorf("decodeText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHoldback(t *testing.T) {
	var out bytes.Buffer
	h := &holdback{w: &out}
	h.Write([]byte("engine message\r\n"))
	if out.Len() != 0 {
		t.Fatal("a possible engine message went through before the exec's fate was known")
	}
	if got := string(h.take()); got != "engine message\r\n" || out.Len() != 0 {
		t.Fatalf("take: %q, out %q", got, out.String())
	}

	out.Reset()
	h = &holdback{w: &out}
	h.Write([]byte("line\r\n"))
	h.Write([]byte("more"))
	if out.String() != "line\r\nmore" {
		t.Fatalf("held frame not passed on in order: %q", out.String())
	}

	out.Reset()
	h = &holdback{w: &out}
	h.Write([]byte("no crlf"))
	if out.String() != "no crlf" {
		t.Fatalf("ordinary first frame held: %q", out.String())
	}
	h = &holdback{w: &out}
	h.Write([]byte("x\r\n"))
	if err := h.release(); err != nil || !strings.HasSuffix(out.String(), "x\r\n") {
		t.Fatalf("release: %q %v", out.String(), err)
	}

	// A terminal's first line, from a process the engine says runs, passes at once; while the
	// engine does not say so, it is held as before.
	for _, running := range []bool{true, false} {
		out.Reset()
		asked := 0
		h = &holdback{w: &out, started: func() bool { asked++; return running }}
		h.Write([]byte("/dev/pts/0\r\n"))
		if got := out.String() == "/dev/pts/0\r\n"; got != running || asked != 1 {
			t.Fatalf("running %v: out %q after %d questions", running, out.String(), asked)
		}
	}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct{ wd, p, want string }{
		{"/workspace", "a.txt", "/workspace/a.txt"},
		{"/workspace", "./a/../b", "/workspace/b"},
		{"/workspace", "../etc/passwd", "/etc/passwd"},
		{"/workspace", "../../../x", "/x"},
		{"/workspace", "/abs//x/", "/abs/x"},
		{"", "rel", "/rel"},
		{"/w", "", ""},
		{"/w", "with space/ü", "/w/with space/ü"},
	} {
		if got := (Target{WorkingDir: c.wd}).Resolve(c.p); got != c.want {
			t.Errorf("Resolve(%q) in %q = %q, want %q", c.p, c.wd, got, c.want)
		}
	}
}

func TestClassifyStart(t *testing.T) {
	for msg, want := range map[string]startFailure{
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "nope": executable file not found in $PATH: unknown`:                                startNotFound,
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "./x": stat ./x: no such file or directory: unknown`:                                startNotFound,
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "/etc/passwd": permission denied: unknown`:                                          startPermission,
		`OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd ("/nonexist") set in config.json failed: no such file or directory: unknown`: startCwd,
		`unable to find user bogus: no matching entries in passwd file`:                                                                                                     startUser,
		`crun: executable file ` + "`nope`" + ` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found`:                startNotFound,
		`something else entirely`: startOther,
	} {
		if got := classifyStart(msg); got != want {
			t.Errorf("classifyStart(%q) = %d, want %d", msg, got, want)
		}
	}
}

func TestExactReader(t *testing.T) {
	got, err := io.ReadAll(&exactReader{r: strings.NewReader("abcdef"), left: 4})
	if err != nil || string(got) != "abcd" {
		t.Fatalf("read %q, %v", got, err)
	}
	_, err = io.ReadAll(&exactReader{r: strings.NewReader("ab"), left: 4})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short source: %v", err)
	}
	_, err = io.ReadAll(&exactReader{r: iotest.ErrReader(errors.New("boom")), left: 4})
	if err == nil || err.Error() != "boom" {
		t.Fatalf("failing source: %v", err)
	}
}

func TestLimitWriter(t *testing.T) {
	var out bytes.Buffer
	l := &limitWriter{w: &out, limit: 5}
	if _, err := l.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Write([]byte("def")); !errors.Is(err, errStop) || !l.over || out.String() != "abcde" || l.n != 5 {
		t.Fatalf("past limit: %v over %t out %q n %d", err, l.over, out.String(), l.n)
	}
	l = &limitWriter{w: &out, limit: -1}
	if _, err := l.Write(make([]byte, 1<<20)); err != nil || l.over {
		t.Fatalf("no limit: %v", err)
	}
}

// The in-container kill script in a shell without grep (a Debian-like image cut down to a shell
// and its program; busybox's shell always finds its own grep) says so with killNoGrep, so that
// killTree kills from the host, where a scan would otherwise find nothing and report success
// with the command still running. The real-engine case is the inspect_ai suite's exec_remote
// kill on such an image.
func TestKillScriptWithoutGrep(t *testing.T) {
	sh, err := exec.LookPath("dash")
	if err != nil {
		t.Skip("no dash to run the script with")
	}
	cmd := exec.Command(sh, "-c", killScript, "sh", "TAG")
	cmd.Env = []string{"PATH=" + t.TempDir()}
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != killNoGrep {
		t.Fatalf("kill script without grep: %v, want exit %d", err, killNoGrep)
	}
}
