package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backend/filescript"
)

// writeScript is the Docker backend's, reporting the file's size once cat has finished, so
// that the size is verified and the exec's end is the write's, not just its input's.
var writeScript = strings.Replace(filescript.WriteFile, `exec cat >"$f"`, `cat >"$f" || exit 42
exec wc -c <"$f"`, 1)

// defaultReadLimit is ReadFile's limit when none is given: 100 MiB, the Docker backend's.
const defaultReadLimit = 100 << 20

// Files move over exec, with the Docker backend's scripts, so the same checks and exit codes
// give the same typed errors.

func resolve(t backend.Target, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dirOr(t.WorkingDir), p)
}

// fileError maps a script's exit code to composebox's error for op on p.
func fileError(t backend.Target, op, p string, code int, stderr string) error {
	what := fmt.Sprintf("%s %s", op, p)
	if t.Service != "" {
		what += " in " + t.Service
	}
	switch code {
	case 0:
		return nil
	case filescript.CodeNotFound, filescript.CodeNotDir:
		return errdefs.New(errdefs.ErrNotFound, what+": no such file or directory")
	case filescript.CodeIsDir:
		return errdefs.New(errdefs.ErrIsDirectory, what+": is a directory")
	case filescript.CodePermission:
		return errdefs.New(errdefs.ErrPermission, what+": permission denied")
	case filescript.CodeNotRegular:
		return fmt.Errorf("%s: %s: %w", what, strings.TrimSpace(stderr), errors.Join(backend.ErrNotRegularFile, errdefs.ErrInvalidConfig))
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s: exit code %d: %s", what, code, strings.TrimSpace(stderr)))
}

// limitWriter passes at most limit bytes to w (negative: no limit) and fails past it.
type limitWriter struct {
	w     io.Writer
	limit int64
	n     int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.limit >= 0 && l.n+int64(len(p)) > l.limit {
		return 0, errStop
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// script runs one of the file scripts on p as t's user, through run: a call that ends early
// (a limit, a cancelled context) kills it, and a dead container is ErrUnavailable naming op
// and p. It returns the script's exit code and the end of its stderr.
func (b *Backend) script(ctx context.Context, t backend.Target, op, script, p string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	res, err := b.run(ctx, t, backend.ExecRequest{Cmd: []string{"sh", "-c", script, "sh", p}, Cwd: "/",
		StdinReader: stdin, Stdout: stdout, OutputLimit: 64 << 10}, nil, op+" "+p, nil)
	return res.ExitCode, string(res.Stderr), err
}

// ReadFile reads a file whole, up to limit bytes (0: defaultReadLimit).
func (b *Backend) ReadFile(ctx context.Context, t backend.Target, p string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := b.ReadFileTo(ctx, t, p, &buf, limit)
	return buf.Bytes(), err
}

// ReadFileTo streams a file into w, failing with ErrOutputLimit past limit.
func (b *Backend) ReadFileTo(ctx context.Context, t backend.Target, p string, w io.Writer, limit int64) (int64, error) {
	if limit == 0 {
		limit = defaultReadLimit
	}
	full := resolve(t, p)
	lw := &limitWriter{w: w, limit: limit}
	code, stderr, err := b.script(ctx, t, "read", filescript.ReadFile, full, nil, lw)
	switch {
	case errors.Is(err, errStop):
		return lw.n, errdefs.New(errdefs.ErrOutputLimit, fmt.Sprintf("read %s: larger than %d bytes", full, limit))
	case err != nil:
		return lw.n, err
	}
	return lw.n, fileError(t, "read", full, code, stderr)
}

// WriteFile writes data to a file, creating its parents.
func (b *Backend) WriteFile(ctx context.Context, t backend.Target, p string, data []byte) error {
	return b.WriteFileFrom(ctx, t, p, bytes.NewReader(data), int64(len(data)))
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// WriteFileFrom streams r into a file; size, when not negative, is checked against what r
// gave.
func (b *Backend) WriteFileFrom(ctx context.Context, t backend.Target, p string, r io.Reader, size int64) error {
	full := resolve(t, p)
	cr := &countReader{r: r}
	var out bytes.Buffer
	code, stderr, err := b.script(ctx, t, "write", writeScript, full, cr, &out)
	if err != nil {
		return err
	}
	if err := fileError(t, "write", full, code, stderr); err != nil {
		return err
	}
	if size >= 0 && cr.n != size {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("write %s: %d bytes given, %d expected", full, cr.n, size))
	}
	if got := strings.TrimSpace(out.String()); got != strconv.FormatInt(cr.n, 10) {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("write %s: %d bytes sent, the file has %q", full, cr.n, got))
	}
	return nil
}

// ReadDirTo streams a directory's contents as a tar archive.
func (b *Backend) ReadDirTo(ctx context.Context, t backend.Target, p string, w io.Writer) error {
	full := resolve(t, p)
	code, stderr, err := b.script(ctx, t, "read directory", filescript.ReadDir, full, nil, w)
	if err != nil {
		return err
	}
	return fileError(t, "read directory", full, code, stderr)
}

// WriteDirFrom unpacks a tar archive into a directory.
func (b *Backend) WriteDirFrom(ctx context.Context, t backend.Target, p string, r io.Reader) error {
	full := resolve(t, p)
	code, stderr, err := b.script(ctx, t, "write directory", filescript.WriteDir, full, r, io.Discard)
	if err != nil {
		return err
	}
	return fileError(t, "write directory", full, code, stderr)
}
