package backend

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultOutputLimit is the per-stream cap on captured output when ExecRequest.OutputLimit is 0.
const DefaultOutputLimit = 10 << 20

// Target is one running container of a sample that execs and file operations go to. It is a
// plain value: copy it freely.
type Target struct {
	// Container is the container's id (or name) on its backend.
	Container string
	// Service names the container in error messages ("read /x in web: ..."). Optional.
	Service string
	// WorkingDir is where relative paths and a relative or empty Cwd resolve. "" is taken as
	// "/" for paths and as the container's own default for execs.
	WorkingDir string
	// User is the default user of execs and the user file operations act as: a name or
	// uid[:gid]. "" is the container's configured user.
	User string
}

// ExecRequest is one command to run. The zero value of every field but Cmd is the default.
type ExecRequest struct {
	// Cmd is the argv. There is no implicit shell: use []string{"sh", "-c", script} for one.
	Cmd []string
	// Stdin is written to the command while its output is read, so any size works. Empty
	// (and no StdinReader) means stdin is closed (the command reads EOF at once).
	Stdin []byte
	// StdinReader streams the command's stdin from a reader, as os/exec's Cmd.Stdin does: read
	// as the command consumes it, until EOF, which closes the command's stdin. A read error
	// kills the command and fails the call. A read that blocks never holds the call past its
	// end (timeout, ctx, kill, exit): it is left to finish on its own. Not with Stdin.
	StdinReader io.Reader
	// Stdout and Stderr, when set, receive every byte of the stream as the command writes it,
	// as os/exec's Cmd.Stdout does; the result still keeps the tail (OutputLimit). A writer
	// that blocks holds the command back (like a full pipe) but never the call past its end;
	// a writer that fails stops the command and fails the call with its error.
	Stdout, Stderr io.Writer
	// Cwd is the working directory. A relative one resolves against Target.WorkingDir with
	// POSIX rules; "" is Target.WorkingDir (or the container's own default).
	Cwd string
	// Env adds to (and overrides) the container's environment.
	Env map[string]string
	// User is a name or uid[:gid]; "" is Target.User.
	User string
	// Timeout, when positive, kills the command and every process it started once it passes,
	// and makes the call return ErrTimeout with the output so far.
	Timeout time.Duration
	// OutputLimit caps the bytes kept per stream (0: DefaultOutputLimit). Past it the tail is
	// kept and the stream's Truncated flag set.
	OutputLimit int
	// StrictLimit turns going past OutputLimit into an ErrOutputLimit error: the command is
	// killed at that point and the result holds the first OutputLimit bytes.
	StrictLimit bool
	// TTY runs the command on a pseudo-terminal, as `docker exec -t` does: what it writes to
	// stdout and stderr arrives as one stream in Stdout (and the result's Stdout), with the
	// terminal's line endings, and StdinReader carries keystrokes.
	TTY bool
	// Size is the terminal's size when the command starts (TTY only; zero: the engine's
	// default, 80x24 or so).
	Size WindowSize
	// Resize is the resize hook of a TTY: each size sent on it while the command runs is passed
	// on to the terminal (the command gets SIGWINCH). Nil: the size never changes.
	Resize <-chan WindowSize
}

// WindowSize is a terminal's size in character cells.
type WindowSize struct {
	Rows, Cols uint
}

// ExecResult is a finished command. A non-zero ExitCode is a result, not an error.
type ExecResult struct {
	ExitCode int
	// Stdout and Stderr are the captured bytes: everything, or the last OutputLimit bytes when
	// the stream was truncated.
	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool
	// StdoutBytes and StderrBytes count every byte the command wrote, kept or not.
	StdoutBytes, StderrBytes int64
	Duration                 time.Duration
}

// StdoutText is Stdout as UTF-8 text, with U+FFFD in place of each invalid byte.
func (r ExecResult) StdoutText() string { return DecodeText(r.Stdout) }

// StderrText is Stderr as UTF-8 text, with U+FFFD in place of each invalid byte.
func (r ExecResult) StderrText() string { return DecodeText(r.Stderr) }

// ExecError is the error of an exec that ran but did not complete normally: ErrTimeout,
// ErrOutputLimit, ErrPermission (argv[0] not executable), ErrNotFound (no such Cwd), or a
// cancelled context. Result holds what the command wrote before that. errors.Is sees the
// category through it.
type ExecError struct {
	Result ExecResult
	Err    error
}

func (e *ExecError) Error() string { return e.Err.Error() }
func (e *ExecError) Unwrap() error { return e.Err }

// ErrNotRegularFile is what reading anything but a regular file gives (with ErrInvalidConfig):
// a FIFO the agent made would block the read until someone writes to it, and a device such as
// /dev/zero would stream forever, so neither is opened.
var ErrNotRegularFile = errors.New("not a regular file")

// DecodeText decodes b as UTF-8, turning each invalid byte into U+FFFD, as Python's
// errors="replace" does, which Python harnesses expect.
func DecodeText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		sb.WriteRune(r) // RuneError for an invalid byte is U+FFFD
		b = b[size:]
	}
	return sb.String()
}

// Diagnosis is the state of a container, as its backend reports it, for explaining why it
// cannot run anything.
type Diagnosis struct {
	Container string // as given in the Target
	Name      string
	// Missing is set when the container no longer exists; nothing else is then known.
	Missing    bool
	Status     string // created, running, paused, restarting, removing, exited, dead
	Running    bool
	Paused     bool
	ExitCode   int
	OOMKilled  bool
	Error      string // the engine's error for the container, if any
	FinishedAt string
	// LogTail is the end of the container's logs (stdout and stderr interleaved).
	LogTail string
}

// String is a one-line explanation for error messages.
func (d Diagnosis) String() string {
	name := d.Name
	if name == "" {
		name = d.Container
	}
	if d.Missing {
		return fmt.Sprintf("container %s no longer exists", name)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "container %s is %s", name, d.Status)
	if !d.Running || d.Paused {
		fmt.Fprintf(&sb, " (exit code %d, oom killed %t", d.ExitCode, d.OOMKilled)
		if d.FinishedAt != "" && !strings.HasPrefix(d.FinishedAt, "0001-") {
			fmt.Fprintf(&sb, ", finished %s", d.FinishedAt)
		}
		if d.Error != "" {
			fmt.Fprintf(&sb, ", error %q", d.Error)
		}
		sb.WriteString(")")
	}
	if d.LogTail != "" {
		fmt.Fprintf(&sb, "; last log lines: %q", d.LogTail)
	} else {
		sb.WriteString("; no log output")
	}
	return sb.String()
}
