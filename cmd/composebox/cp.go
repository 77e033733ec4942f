package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

func newCpCmd(g *globals) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "cp -p PROJECT SRC DST",
		Short: "Copy a file between the host and a sample's service",
		Long: `Copies one file. Exactly one side names the sample: SERVICE:PATH, or :PATH for the default
service. The other side is a host path, or - for stdin/stdout. A relative PATH resolves against the
container's working directory. Files are written as the service's user.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if project == "" {
				project = os.Getenv("COMPOSEBOX_PROJECT")
			}
			if project == "" {
				return usageError{errors.New("cp: -p PROJECT (or COMPOSEBOX_PROJECT) is required")}
			}
			return runCp(cmd, g, project, args[0], args[1])
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "the sample's project name")
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
	Project       string  `json:"project"`
	Source        string  `json:"source"`
	Destination   string  `json:"destination"`
	Bytes         int64   `json:"bytes"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 *string `json:"content_base64,omitempty"`
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

func runCp(cmd *cobra.Command, g *globals, project, src, dst string) error {
	ctx := cmd.Context()
	srcSvc, srcPath, srcIn := sandboxPath(src)
	dstSvc, dstPath, dstIn := sandboxPath(dst)
	if srcIn == dstIn {
		return usageError{fmt.Errorf("cp %s %s: exactly one side must be SERVICE:PATH or :PATH", src, dst)}
	}
	res := cpJSON{Project: project, Source: src, Destination: dst}
	if srcIn {
		sb, done, err := openSandbox(ctx, g, project, srcSvc)
		if err != nil {
			return err
		}
		defer done()
		if dst == "-" {
			if !g.JSON {
				// Streamed as it is read: the file is the result.
				cw := &countingWriter{w: g.stdout}
				_, err = sb.ReadFileTo(ctx, srcPath, cw, 0)
				res.Bytes = cw.n
				g.setResult(res, nil)
				return err
			}
			var buf bytes.Buffer
			if _, err := sb.ReadFileTo(ctx, srcPath, &buf, 0); err != nil {
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
		f, err := os.Create(dst)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		cw := &countingWriter{w: f}
		if _, err := sb.ReadFileTo(ctx, srcPath, cw, 0); err != nil {
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
	sb, done, err := openSandbox(ctx, g, project, dstSvc)
	if err != nil {
		return err
	}
	defer done()
	if src == "-" {
		data, err := io.ReadAll(g.stdin)
		if err != nil {
			return fmt.Errorf("cp: read stdin: %w", err)
		}
		if err := sb.WriteFileFrom(ctx, dstPath, bytes.NewReader(data), int64(len(data))); err != nil {
			return err
		}
		res.Bytes = int64(len(data))
		g.setResult(res, nil)
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if st.IsDir() {
		return usageError{fmt.Errorf("cp %s: copying directories is not supported", src)}
	}
	if err := sb.WriteFileFrom(ctx, dstPath, f, st.Size()); err != nil {
		return err
	}
	res.Bytes = st.Size()
	g.setResult(res, nil)
	return nil
}
