// Package hosttar moves directories between the host and tar streams: Write archives a host
// directory, and Extract unpacks an archive that came from a sandbox into a host directory.
//
// The archive from a sandbox is hostile: the agent inside chose every name, link and size in
// it. Extract writes through an os.Root, which the kernel-level checks of the standard library
// confine to the destination: an absolute name, a "..", or a symlink (in the archive or already
// on disk) that points outside cannot make a write land outside it. Symlinks are recreated as
// symlinks, whatever they point at, and never followed while writing. Devices, FIFOs and other
// special files are skipped.
package hosttar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/composebox/composebox/internal/errdefs"
)

// Skipped names an archive entry Extract did not write, and why.
type Skipped struct {
	Name   string
	Reason string
}

// Result is what Extract wrote.
type Result struct {
	Files, Dirs, Symlinks int
	// Bytes counts the regular files' contents.
	Bytes   int64
	Skipped []Skipped
}

// Extract unpacks the tar stream r into dst, which it creates (with its parents) when missing.
// maxBytes, when positive, caps the total size of the files' contents: past it Extract stops
// with ErrOutputLimit. An entry that would escape dst fails the whole extraction with
// ErrPermission, naming the entry; what was written before it stays.
func Extract(dst string, r io.Reader, maxBytes int64) (Result, error) {
	var res Result
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return res, fmt.Errorf("extract into %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return res, fmt.Errorf("extract into %s: %w", dst, err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("extract into %s: read archive: %w", dst, err)
		}
		name, ok := entryName(h.Name)
		if !ok {
			return res, escape(dst, h.Name, "its name leaves the destination")
		}
		if name == "." {
			continue
		}
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return res, writeError(dst, h.Name, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return res, writeError(dst, h.Name, err)
			}
			_ = root.Chmod(name, fs.FileMode(h.Mode)&fs.ModePerm|0o700)
			res.Dirs++
		case tar.TypeReg, tar.TypeRegA:
			if maxBytes > 0 && res.Bytes+h.Size > maxBytes {
				return res, errdefs.New(errdefs.ErrOutputLimit, fmt.Sprintf("extract into %s: %s: the copy passes the %d byte limit (--max-size)", dst, h.Name, maxBytes))
			}
			if err := replaceable(root, name); err != nil {
				return res, writeError(dst, h.Name, err)
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(h.Mode)&fs.ModePerm|0o600)
			if err != nil {
				return res, writeError(dst, h.Name, err)
			}
			n, err := io.Copy(f, tr)
			res.Bytes += n
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return res, writeError(dst, h.Name, err)
			}
			res.Files++
		case tar.TypeSymlink:
			if err := replaceable(root, name); err != nil {
				return res, writeError(dst, h.Name, err)
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return res, writeError(dst, h.Name, err)
			}
			res.Symlinks++
		case tar.TypeLink:
			target, ok := entryName(h.Linkname)
			if !ok {
				return res, escape(dst, h.Name, "it hard-links "+h.Linkname+", outside the destination")
			}
			if err := replaceable(root, name); err != nil {
				return res, writeError(dst, h.Name, err)
			}
			if err := root.Link(target, name); err != nil {
				return res, writeError(dst, h.Name, err)
			}
			res.Files++
		default:
			res.Skipped = append(res.Skipped, Skipped{Name: h.Name, Reason: fmt.Sprintf("special file (tar type %q)", h.Typeflag)})
		}
	}
}

// entryName cleans an archive name into a path relative to the destination; false when it is
// absolute or climbs out.
func entryName(name string) (string, bool) {
	if strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return "", false
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

// replaceable removes what is at name when it is a symlink or a file, so that a new entry
// replaces it instead of being written through it. A directory stays.
func replaceable(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("a directory is in the way")
	}
	return root.Remove(name)
}

func escape(dst, name, why string) error {
	return errdefs.New(errdefs.ErrPermission, fmt.Sprintf("extract into %s: refused entry %q: %s", dst, name, why))
}

// writeError reports a failed write; one the root refused because it would leave the
// destination (through a symlink, say) is ErrPermission.
func writeError(dst, name string, err error) error {
	if strings.Contains(err.Error(), "path escapes from parent") {
		return escape(dst, name, "it would be written through a link that leaves the destination")
	}
	return fmt.Errorf("extract into %s: %s: %w", dst, name, err)
}

// Write archives the contents of the host directory src into w, names relative to src.
// Symlinks are archived as symlinks and never followed; special files are skipped.
func Write(src string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular(), info.IsDir():
		default:
			return nil
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		// Ownership is the sandbox user's, as for a file written into the sandbox.
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.CopyN(tw, f, info.Size()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", src, err)
	}
	return tw.Close()
}
