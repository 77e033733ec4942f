package sandboxio

import (
	"context"
	"io"

	"github.com/composebox/composebox/internal/errdefs"
)

// ReadDirTo streams the directory at p (relative to the working directory) into w as a tar
// archive of its contents, made by tar in the container as the target's user. A w that blocks
// does not hold the call past ctx.
//
// Errors carry the path: ErrNotFound (also when p is not a directory), ErrPermission,
// ErrUnavailable; ErrPrerequisite when the container has no /bin/sh.
func ReadDirTo(ctx context.Context, t Target, p string, w io.Writer) error {
	abs := t.Resolve(p)
	if abs == "" {
		return t.fileError(errdefs.ErrNotFound, "read directory", p, "empty path")
	}
	abort := make(chan struct{})
	gw := &guardedWriter{w: w, abort: abort}
	stderr := newTailBuffer(4096, false)
	o, err := runFileScript(ctx, t, "read directory "+abs, readDirScript, abs, nil, gw, stderr, abort)
	if err != nil {
		return err
	}
	return fileOutcome(ctx, t, "read directory", abs, o, stderr)
}

// WriteDirFrom unpacks the tar archive read from r into the directory at p, creating it (and
// its parents) when missing and merging into it when present, with tar in the container as the
// target's user. An r that blocks does not hold the call past ctx.
//
// Errors carry the path: ErrNotFound (p exists and is not a directory), ErrPermission,
// ErrUnavailable.
func WriteDirFrom(ctx context.Context, t Target, p string, r io.Reader) error {
	abs := t.Resolve(p)
	if abs == "" {
		return t.fileError(errdefs.ErrNotFound, "write directory", p, "empty path")
	}
	stderr := newTailBuffer(4096, false)
	o, err := runFileScript(ctx, t, "write directory "+abs, writeDirScript, abs, r, io.Discard, stderr, nil)
	if err != nil {
		return err
	}
	return fileOutcome(ctx, t, "write directory", abs, o, stderr)
}
