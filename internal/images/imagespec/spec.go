// Package imagespec describes the images composebox builds for itself, FROM scratch and from
// in-memory build contexts, because no registry can be assumed reachable: a spec's tag is a hash
// of its build context, so it can be named (BaseRef) without building anything, and without
// linking the engine client. Package images builds them.
package imagespec

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"
)

// File is one entry of a build context.
type File struct {
	Name string // slash-separated path inside the context
	Mode int64  // permission bits, including setuid/setgid/sticky
	Body []byte // a regular file's content
	Link string // a symlink's target; set for symlinks only
	Dir  bool
}

// Spec is an image built from an in-memory context.
type Spec struct {
	Repository string // e.g. "composebox/base"
	Dockerfile string
	Files      []File
	Labels     map[string]string
}

// Tag is the spec's content-addressed reference: the same context always gives the same tag.
func (s Spec) Tag() string {
	h := sha256.New()
	fmt.Fprintf(h, "dockerfile %d\n%s\n", len(s.Dockerfile), s.Dockerfile)
	for _, f := range s.Files {
		fmt.Fprintf(h, "file %q %o %t %q %d\n", f.Name, f.Mode, f.Dir, f.Link, len(f.Body))
		h.Write(f.Body)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		fmt.Fprintf(h, "label %q=%q\n", k, s.Labels[k])
	}
	return s.Repository + ":" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Context returns the spec's build context as a tar stream.
func (s Spec) Context() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	files := append([]File{{Name: "Dockerfile", Mode: 0o644, Body: []byte(s.Dockerfile)}}, s.Files...)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case f.Dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, f.Name+"/"
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write build context %s: %w", f.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Body); err != nil {
				return nil, fmt.Errorf("write build context %s: %w", f.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
