package sandboxio

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	dockererrdefs "github.com/docker/docker/errdefs"

	"github.com/composebox/composebox/internal/errdefs"
)

// CopyOut copies the file or directory at src in the container (relative to the working
// directory) into the existing host directory dstDir, as `docker cp CTR:SRC DSTDIR` does: the
// copy is dstDir/<base of src>. A symlink at src is copied as a link. It works on a stopped
// container too.
//
// It goes through the engine's archive API, which reads as root: unlike ReadFile, it does not
// apply the sandbox user's permissions, and it does not see tmpfs mounts. It is meant for
// operators (`composebox cp`), not for the agent's file calls.
//
// The tar stream comes from the container, so it is not trusted: no entry can create or
// write anything outside dstDir, whatever its name, a symlink or hard link before it, or a
// symlink already in dstDir (see extractTar).
func CopyOut(ctx context.Context, t Target, src, dstDir string) error {
	abs := t.Resolve(src)
	if abs == "" {
		return t.fileError(errdefs.ErrNotFound, "copy", src, "empty path")
	}
	rc, _, err := t.Client.CopyFromContainer(ctx, t.Container, abs)
	if err != nil {
		if dockererrdefs.IsNotFound(err) {
			// Both a missing path and a missing container are "not found" here.
			if _, ierr := t.Client.ContainerInspect(ctx, t.Container); dockererrdefs.IsNotFound(ierr) {
				return t.unavailable(ctx, "copy "+abs, err)
			}
			return t.fileError(errdefs.ErrNotFound, "copy", abs, "no such file or directory")
		}
		return t.engineError(ctx, "copy "+abs, err)
	}
	defer rc.Close()
	if err := extractTar(rc, dstDir); err != nil {
		return fmt.Errorf("copy %s%s to %s: %w", abs, t.in(), dstDir, err)
	}
	return nil
}

// errUnsafeEntry marks a tar entry that would land outside the destination.
var errUnsafeEntry = errors.New("unsafe tar entry")

// extractTar unpacks a tar stream into the existing directory dst. Every file operation goes
// through an os.Root opened on dst, which refuses any path (through "..", an absolute
// symlink, or a symlink pointing out) that resolves outside it; on top of that, entry names
// and hard link targets that are absolute or climb out are rejected before anything is
// touched. The first unsafe entry stops the extraction with an error. Only regular files,
// directories, symlinks and hard links are created; permission bits are kept, setuid,
// setgid and sticky bits and ownership are not.
func extractTar(r io.Reader, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		if h.Typeflag != tar.TypeDir && name == "." {
			return fmt.Errorf("%w: %q is not a directory", errUnsafeEntry, h.Name)
		}
		if dir := path.Dir(name); dir != "." && h.Typeflag != tar.TypeDir {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name != "." {
				// Writable while children are extracted; the entry's own mode comes last.
				if err := root.MkdirAll(name, 0o755); err != nil {
					return err
				}
				dirs = append(dirs, dirMode{name, mode})
			}
		case tar.TypeReg:
			if err := extractFile(root, name, mode, tr); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := removeExisting(root, name); err != nil {
				return err
			}
			// The link itself lives inside dst, whatever it points at; os.Root will not
			// follow it out for later entries.
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := entryName(h.Linkname)
			if err != nil {
				return err
			}
			if err := removeExisting(root, name); err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return err
			}
		default:
			// Devices, fifos and the like are not copied out of a sandbox.
		}
	}
	for _, d := range slices.Backward(dirs) {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// extractFile writes one regular file. An existing symlink at name is replaced, not written
// through.
func extractFile(root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	if fi, err := root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return root.Chmod(name, mode)
}

// removeExisting clears the way for a link at name; a directory is left alone (and the link
// then fails).
func removeExisting(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || fi.IsDir() {
		return err
	}
	return root.Remove(name)
}

// entryName cleans a tar entry name and rejects one that is absolute or climbs out.
func entryName(n string) (string, error) {
	if n == "" || strings.ContainsRune(n, 0) || path.IsAbs(n) || strings.HasPrefix(n, `\`) {
		return "", fmt.Errorf("%w: %q", errUnsafeEntry, n)
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q", errUnsafeEntry, n)
	}
	return c, nil
}
