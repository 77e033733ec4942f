package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

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

func runCp(cmd *cobra.Command, g *globals, project, src, dst string) error {
	ctx := cmd.Context()
	srcSvc, srcPath, srcIn := sandboxPath(src)
	dstSvc, dstPath, dstIn := sandboxPath(dst)
	if srcIn == dstIn {
		return usageError{fmt.Errorf("cp %s %s: exactly one side must be SERVICE:PATH or :PATH", src, dst)}
	}
	if srcIn {
		sb, done, err := openSandbox(ctx, g, project, srcSvc)
		if err != nil {
			return err
		}
		defer done()
		if dst == "-" {
			_, err = sb.ReadFileTo(ctx, srcPath, g.stdout, 0)
			return err
		}
		f, err := os.Create(dst)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		if _, err := sb.ReadFileTo(ctx, srcPath, f, 0); err != nil {
			f.Close()
			os.Remove(dst)
			return err
		}
		return f.Close()
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
		return sb.WriteFileFrom(ctx, dstPath, bytes.NewReader(data), int64(len(data)))
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
	return sb.WriteFileFrom(ctx, dstPath, f, st.Size())
}
