package hosttar

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/composebox/composebox/internal/errdefs"
)

type entry struct {
	name, link string
	typ        byte
	body       string
}

func archive(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestExtractRefusesEveryWayOut plays the agent that chose the archive: each hostile entry
// fails the extraction with ErrPermission, and the directory beside the destination (where
// each attack aims) stays empty.
func TestExtractRefusesEveryWayOut(t *testing.T) {
	for name, entries := range map[string][]entry{
		"dotdot":                {{name: "../pwned", typ: tar.TypeReg, body: "x"}},
		"nested dotdot":         {{name: "a/../../pwned", typ: tar.TypeReg, body: "x"}},
		"absolute":              {{name: "/PLACEHOLDER/pwned", typ: tar.TypeReg, body: "x"}},
		"through symlink":       {{name: "l", link: "PLACEHOLDER", typ: tar.TypeSymlink}, {name: "l/pwned", typ: tar.TypeReg, body: "x"}},
		"through relative link": {{name: "l", link: "../outside", typ: tar.TypeSymlink}, {name: "l/pwned", typ: tar.TypeReg, body: "x"}},
		"dir through symlink":   {{name: "l", link: "../outside", typ: tar.TypeSymlink}, {name: "l/sub/", typ: tar.TypeDir}},
		"hard link out":         {{name: "h", link: "../outside/secret", typ: tar.TypeLink}},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range entries {
				if entries[i].link == "PLACEHOLDER" {
					entries[i].link = outside
				}
				if entries[i].name == "/PLACEHOLDER/pwned" {
					entries[i].name = outside + "/pwned"
				}
			}
			_, err := Extract(filepath.Join(base, "dst"), archive(t, entries...), 0)
			if !errors.Is(err, errdefs.ErrPermission) {
				t.Errorf("extract: %v, want ErrPermission", err)
			}
			if left, _ := os.ReadDir(outside); len(left) != 0 {
				t.Errorf("written outside the destination: %v", left)
			}
		})
	}
}

func TestExtractKeepsSymlinksAndSkipsSpecialFiles(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "dst")
	res, err := Extract(dst, archive(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./d/", typ: tar.TypeDir},
		entry{name: "./d/f", typ: tar.TypeReg, body: "hello"},
		entry{name: "./abs", link: "/etc/passwd", typ: tar.TypeSymlink},
		entry{name: "./rel", link: "d/f", typ: tar.TypeSymlink},
		entry{name: "./fifo", typ: tar.TypeFifo},
	), 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "rel")); err != nil || string(b) != "hello" {
		t.Errorf("rel: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "abs")); err != nil || l != "/etc/passwd" {
		t.Errorf("abs link: %q, %v", l, err)
	}
	if res.Files != 1 || res.Symlinks != 2 || res.Bytes != 5 || len(res.Skipped) != 1 {
		t.Errorf("result %+v", res)
	}
	if _, err := Extract(t.TempDir(), archive(t, entry{name: "big", typ: tar.TypeReg, body: "0123456789"}), 5); !errors.Is(err, errdefs.ErrOutputLimit) {
		t.Errorf("past --max-size: %v", err)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(src, &buf); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, err := Extract(dst, &buf, 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a", "b", "f")); string(b) != "data" {
		t.Errorf("file: %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(dst, "link")); l != "/etc/hostname" {
		t.Errorf("link not kept: %q", l)
	}
}
