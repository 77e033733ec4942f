package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/hosttar"
	"github.com/composebox/composebox/orchestrator"
)

type cpOptions struct {
	Project string
	// MaxSize caps what a copy out writes (0: no cap, but the JSON document's content keeps
	// the library's default read limit).
	MaxSize int64
	Timeout time.Duration
}

func newCpCmd(g *globals) *cobra.Command {
	var opts cpOptions
	cmd := &cobra.Command{
		Use:   "cp -p PROJECT SRC DST",
		Short: "Copy files or directories between the host and a sample's service",
		Long: `Copies a file or a directory. Exactly one side names the sample: SERVICE:PATH, or :PATH for
the default service. The other side is a host path, or - for stdin/stdout (files only). A
relative PATH resolves against the container's working directory. What is written in the
container is written as the service's user.

A directory is copied with tar: DST becomes a copy of SRC (created when missing, merged into
when present), symlinks are kept as symlinks, and special files (FIFOs, devices) are skipped.
Copying out never writes outside DST, whatever the container holds: an entry whose name or
symlink would lead outside is refused (permission_denied).

Copying out streams with no size cap unless --max-size is given. --timeout bounds the whole
copy (exit 124). COMPOSEBOX_PROJECT stands in for -p.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := projectOf("cp", opts.Project)
			if err != nil {
				return err
			}
			opts.Project = p
			if opts.MaxSize < 0 {
				return usageError{fmt.Errorf("cp: --max-size %d: must not be negative", opts.MaxSize)}
			}
			ctx := cmd.Context()
			if opts.Timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
				defer cancel()
			}
			err = runCp(ctx, g, opts, args[0], args[1])
			if opts.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, errdefs.ErrTimeout) {
				err = errdefs.Wrap(errdefs.ErrTimeout, err, fmt.Sprintf("cp %s %s: not done after --timeout %s", args[0], args[1], opts.Timeout))
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	cmd.Flags().Int64Var(&opts.MaxSize, "max-size", 0, "refuse to copy out more than this many bytes (0: no cap)")
	secondsVar(cmd.Flags(), &opts.Timeout, "timeout", 0, "give up after this long, e.g. 30s or 30 (exit 124)")
	return cmd
}

// sandboxPath splits SERVICE:PATH; ok is false for a host path.
func sandboxPath(arg string) (service, path string, ok bool) {
	if arg == "-" || strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return "", "", false
	}
	service, path, ok = strings.Cut(arg, ":")
	return service, path, ok && path != ""
}

// cpJSON is the JSON shape of `cp`. Copied to - (stdout), the file's content is in the
// document: as text when it is UTF-8, else base64.
type cpJSON struct {
	Project       string   `json:"project"`
	Source        string   `json:"source"`
	Destination   string   `json:"destination"`
	Bytes         int64    `json:"bytes"`
	Directory     bool     `json:"directory,omitempty"`
	Files         int      `json:"files,omitempty"`
	Skipped       []string `json:"skipped,omitempty"`
	Content       *string  `json:"content,omitempty"`
	ContentBase64 *string  `json:"content_base64,omitempty"`
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func runCp(ctx context.Context, g *globals, opts cpOptions, src, dst string) error {
	srcSvc, srcPath, srcIn := sandboxPath(src)
	dstSvc, dstPath, dstIn := sandboxPath(dst)
	if srcIn == dstIn {
		return usageError{fmt.Errorf("cp %s %s: exactly one side must be SERVICE:PATH or :PATH", src, dst)}
	}
	res := cpJSON{Project: opts.Project, Source: src, Destination: dst}
	if srcIn {
		sb, done, err := openSandbox(ctx, g, opts.Project, srcSvc)
		if err != nil {
			return err
		}
		defer done()
		return g.copyOut(ctx, sb, opts, srcPath, dst, res)
	}
	sb, done, err := openSandbox(ctx, g, opts.Project, dstSvc)
	if err != nil {
		return err
	}
	defer done()
	return g.copyIn(ctx, sb, src, dstPath, res)
}

// limit is the read limit for a copy out: --max-size, else none.
func (opts cpOptions) limit() int64 {
	if opts.MaxSize > 0 {
		return opts.MaxSize
	}
	return -1
}

func (g *globals) copyOut(ctx context.Context, sb *orchestrator.Sandbox, opts cpOptions, srcPath, dst string, res cpJSON) error {
	r, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", `test -d "$1"`, "sh", srcPath}})
	if err != nil {
		return err
	}
	if r.ExitCode == 0 {
		if dst == "-" {
			return usageError{fmt.Errorf("cp %s -: a directory cannot go to stdout; give a host directory", srcPath)}
		}
		return g.copyDirOut(ctx, sb, opts, srcPath, dst, res)
	}
	if dst == "-" {
		if !g.JSON {
			// Streamed as it is read: the file is the result.
			cw := &countingWriter{w: g.stdout}
			_, err := sb.ReadFileTo(ctx, srcPath, cw, opts.limit())
			res.Bytes = cw.n
			g.setResult(res, nil)
			return err
		}
		var buf bytes.Buffer
		if _, err := sb.ReadFileTo(ctx, srcPath, &buf, opts.MaxSize); err != nil {
			return err
		}
		res.Bytes = int64(buf.Len())
		if utf8.Valid(buf.Bytes()) {
			text := buf.String()
			res.Content = &text
		} else {
			b64 := base64.StdEncoding.EncodeToString(buf.Bytes())
			res.ContentBase64 = &b64
		}
		g.setResult(res, nil)
		return nil
	}
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		return errdefs.New(errdefs.ErrIsDirectory, fmt.Sprintf("cp: %s is a directory: give the file's path", dst))
	}
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	cw := &countingWriter{w: f}
	if _, err := sb.ReadFileTo(ctx, srcPath, cw, opts.limit()); err != nil {
		f.Close()
		os.Remove(dst)
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	res.Bytes = cw.n
	g.setResult(res, nil)
	return nil
}

// copyDirOut streams the container's tar of srcPath straight into the host extractor, which
// holds it to dst.
func (g *globals) copyDirOut(ctx context.Context, sb *orchestrator.Sandbox, opts cpOptions, srcPath, dst string, res cpJSON) error {
	pr, pw := io.Pipe()
	type extracted struct {
		r   hosttar.Result
		err error
	}
	done := make(chan extracted, 1)
	go func() {
		r, err := hosttar.Extract(dst, pr, opts.MaxSize)
		if err == nil {
			// Drain the archive's end, so that tar in the container finishes cleanly.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(cmpErr(err, errors.New("extraction stopped")))
		done <- extracted{r, err}
	}()
	rerr := sb.ReadDirTo(ctx, srcPath, pw)
	pw.CloseWithError(cmpErr(rerr, io.EOF))
	ex := <-done
	if ex.err != nil {
		// The extractor's refusal is the story; the container's tar only saw its pipe close.
		return ex.err
	}
	if rerr != nil {
		return rerr
	}
	res.Directory, res.Files, res.Bytes = true, ex.r.Files, ex.r.Bytes
	for _, s := range ex.r.Skipped {
		res.Skipped = append(res.Skipped, s.Name+": "+s.Reason)
		g.log.Warn("cp: skipped a special file", "entry", s.Name, "reason", s.Reason)
	}
	g.setResult(res, func(w io.Writer) error { return nil })
	return nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func (g *globals) copyIn(ctx context.Context, sb *orchestrator.Sandbox, src, dstPath string, res cpJSON) error {
	if src == "-" {
		// Streamed as it comes, the size unknown: a pipe of any size works.
		cr := &countingReader{r: g.stdin}
		if err := sb.WriteFileFrom(ctx, dstPath, cr, -1); err != nil {
			return err
		}
		res.Bytes = cr.n
		g.setResult(res, nil)
		return nil
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if st.IsDir() {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(hosttar.Write(src, pw)) }()
		err := sb.WriteDirFrom(ctx, dstPath, pr)
		pr.Close()
		if err != nil {
			return err
		}
		res.Directory = true
		g.setResult(res, nil)
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer f.Close()
	if err := sb.WriteFileFrom(ctx, dstPath, f, st.Size()); err != nil {
		return err
	}
	res.Bytes = st.Size()
	g.setResult(res, nil)
	return nil
}

// countingReader counts what passes through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
