package sandboxio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// DefaultReadLimit is ReadFile's size limit when the caller passes 0.
const DefaultReadLimit = 100 << 20

// ErrNotRegularFile is what reading anything but a regular file gives (with ErrInvalidConfig):
// a FIFO the agent made would block the read until someone writes to it, and a device such as
// /dev/zero would stream forever, so neither is opened.
var ErrNotRegularFile = backend.ErrNotRegularFile

// notRegularError is a read refused by the file's type. It matches ErrNotRegularFile and
// ErrInvalidConfig.
type notRegularError struct{ msg string }

func (e *notRegularError) Error() string { return e.msg }
func (e *notRegularError) Is(target error) bool {
	return target == ErrNotRegularFile || target == errdefs.ErrInvalidConfig
}

// ReadFile returns the contents of the file at p (relative to the working directory), read
// as the target's user and following symlinks. limit caps the size (0: DefaultReadLimit,
// negative: none); it is enforced while the file streams in, so a larger file costs at most
// limit bytes of memory before ErrOutputLimit.
//
// Errors carry the path: ErrNotFound (also for a path through a non-directory),
// ErrIsDirectory, ErrPermission (the user may not read the file or search a directory on
// the way), ErrNotRegularFile with ErrInvalidConfig (a FIFO, a device or a socket, which is
// never opened), ErrOutputLimit, ErrUnavailable.
func ReadFile(ctx context.Context, t Target, p string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	// A buffer never blocks: no guard needed.
	_, err := readFileTo(ctx, t, p, &buf, limit, false)
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadFileTo streams the file at p into w and returns the number of bytes written. Memory
// use does not depend on the file's size. On ErrOutputLimit, w has received the first limit
// bytes. A w that blocks does not hold the call past ctx: the call returns, and the write in
// progress finishes on its own whenever w lets it. Otherwise as ReadFile.
func ReadFileTo(ctx context.Context, t Target, p string, w io.Writer, limit int64) (int64, error) {
	return readFileTo(ctx, t, p, w, limit, true)
}

func readFileTo(ctx context.Context, t Target, p string, w io.Writer, limit int64, guard bool) (int64, error) {
	abs := t.Resolve(p)
	if abs == "" {
		return 0, t.fileError(errdefs.ErrNotFound, "read", p, "empty path")
	}
	if limit == 0 {
		limit = DefaultReadLimit
	}
	abort := make(chan struct{})
	if guard {
		w = &guardedWriter{w: w, abort: abort}
	}
	lw := &limitWriter{w: w, limit: limit}
	stderr := newTailBuffer(4096, false)
	o, err := runFileScript(ctx, t, "read "+abs, readScript, abs, nil, lw, stderr, abort)
	if err != nil {
		return lw.n, err
	}
	if lw.over {
		return lw.n, t.fileError(errdefs.ErrOutputLimit, "read", abs, fmt.Sprintf("larger than the %d byte limit", limit))
	}
	if lw.err != nil && !errors.Is(lw.err, errStop) {
		return lw.n, fmt.Errorf("read %s%s: write: %w", abs, t.in(), lw.err)
	}
	return lw.n, fileOutcome(ctx, t, "read", abs, o, stderr)
}

// WriteFile writes data to the file at p (relative to the working directory), as the
// target's user: missing parent directories are created, an existing file is truncated and
// overwritten in place, a symlink is written through, and a new file is owned by that user.
//
// Errors carry the path: ErrIsDirectory, ErrPermission (the user may not write the file or
// create it or a parent directory), ErrNotFound (a parent is not a directory),
// ErrUnavailable.
func WriteFile(ctx context.Context, t Target, p string, data []byte) error {
	return WriteFileFrom(ctx, t, p, bytes.NewReader(data), int64(len(data)))
}

// WriteFileFrom is WriteFile streaming from r: exactly size bytes are read from r (any size
// when size is negative) and sent as they come, so memory use does not depend on the size. If
// r fails or ends early, the command writing the file is killed, the call fails, and the file
// may hold a prefix of the data. An r that blocks does not hold the call past ctx: the call
// returns, and the read in progress finishes on its own whenever r lets it.
func WriteFileFrom(ctx context.Context, t Target, p string, r io.Reader, size int64) error {
	abs := t.Resolve(p)
	if abs == "" {
		return t.fileError(errdefs.ErrNotFound, "write", p, "empty path")
	}
	if strings.HasSuffix(p, "/") {
		return t.fileError(errdefs.ErrIsDirectory, "write", abs, "is a directory")
	}
	src := r
	if size >= 0 {
		src = &exactReader{r: r, left: size}
	}
	stderr := newTailBuffer(4096, false)
	o, err := runFileScript(ctx, t, "write "+abs, writeScript, abs, src, io.Discard, stderr, nil)
	if err != nil {
		return err
	}
	if o.started && o.end == endStdin {
		return fmt.Errorf("write %s%s: read data: %w", abs, t.in(), o.endErr)
	}
	return fileOutcome(ctx, t, "write", abs, o, stderr)
}

// runFileScript runs a file script as the target's user.
func runFileScript(ctx context.Context, t Target, op, script, abs string, stdin io.Reader, stdout, stderr io.Writer, abort chan struct{}) (outcome, error) {
	spec := runSpec{
		abort:  abort,
		cmd:    []string{"/bin/sh", "-c", script, "sh", abs},
		user:   t.User,
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
	}
	// The working directory is irrelevant (the path is absolute) and must not be able to
	// fail the exec, so it stays the container's.
	e, err := start(ctx, t, spec, op)
	if err != nil {
		return outcome{}, err
	}
	return e.wait(ctx, op)
}

// fileOutcome maps a file script's outcome to the contract's errors.
func fileOutcome(ctx context.Context, t Target, op, abs string, o outcome, stderr *tailBuffer) error {
	msg := strings.TrimSpace(decodeText(stderr.Bytes()))
	if !o.started {
		if o.startFail == startNotFound {
			return errdefs.New(errdefs.ErrPrerequisite, fmt.Sprintf("%s %s%s: the image has no /bin/sh, which file operations need: %s", op, abs, t.in(), o.startMsg))
		}
		return fmt.Errorf("%s %s%s: %s", op, abs, t.in(), o.startMsg)
	}
	switch o.end {
	case endExited:
	case endCanceled:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errdefs.Wrap(errdefs.ErrTimeout, ctx.Err(), op+" "+abs+t.in())
		}
		return fmt.Errorf("%s %s%s: %w", op, abs, t.in(), ctx.Err())
	default:
		if o.endErr != nil {
			return fmt.Errorf("%s %s%s: %w", op, abs, t.in(), o.endErr)
		}
		return fmt.Errorf("%s %s%s: interrupted", op, abs, t.in())
	}
	switch o.exitCode {
	case 0:
		return nil
	case codeNotFound:
		return t.fileError(errdefs.ErrNotFound, op, abs, "no such file or directory")
	case codeNotDir:
		return t.fileError(errdefs.ErrNotFound, op, abs, "not a directory")
	case codeIsDir:
		return t.fileError(errdefs.ErrIsDirectory, op, abs, "is a directory")
	case codePermission:
		return t.fileError(errdefs.ErrPermission, op, abs, "permission denied")
	case codeNotRegular:
		problem := ErrNotRegularFile.Error()
		if msg != "" {
			problem += " (" + msg + ")"
		}
		return &notRegularError{msg: fmt.Sprintf("%s %s%s: %s: composebox reads regular files and directories only", op, abs, t.in(), problem)}
	}
	if msg == "" {
		msg = fmt.Sprintf("exit code %d", o.exitCode)
	}
	if strings.Contains(strings.ToLower(msg), "permission denied") || strings.Contains(strings.ToLower(msg), "read-only file system") {
		// A check passed but the kernel still refused (an ACL, a read-only mount, a race).
		return t.fileError(errdefs.ErrPermission, op, abs, msg)
	}
	return errors.New(op + " " + abs + t.in() + ": " + msg)
}

// exactReader reads exactly left bytes from r: fewer is an error (so the file is never
// silently short), and it never reads past them.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if e.left > 0 {
			return n, fmt.Errorf("data ended %d bytes short of its size: %w", e.left, io.ErrUnexpectedEOF)
		}
		return n, io.EOF
	}
	return n, err
}
