package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpDirectories copies a tree in and back out, symlinks kept, and a file past the read
// limit out with no cap.
func TestCpDirectories(t *testing.T) {
	o := newLib(t)
	p := samples(t, o, uniqueTask("cpdir"), keepAlive, 1)[0].Project()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "deep", "f.txt"), []byte("deep file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/deep/f.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "cp", "-p", p, src, ":/tmp/tree"); code != 0 {
		t.Fatalf("cp dir in: exit %d, %s", code, errOut)
	}
	if code, out, _ := runCLI(t, "exec", "-p", p, "sh", "-c", "cat /tmp/tree/link; readlink /tmp/tree/link"); code != 0 || out != "deep file\nsub/deep/f.txt\n" {
		t.Errorf("in the container: exit %d, %q", code, out)
	}
	// A FIFO in the tree is skipped, not read.
	if code, _, _ := runCLI(t, "exec", "-p", p, "mkfifo", "/tmp/tree/fifo"); code != 0 {
		t.Fatal("mkfifo")
	}
	back := filepath.Join(t.TempDir(), "back")
	if code, _, errOut := runCLI(t, "cp", "-p", p, ":/tmp/tree", back); code != 0 {
		t.Fatalf("cp dir out: exit %d, %s", code, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(back, "sub", "deep", "f.txt")); err != nil || string(b) != "deep file\n" {
		t.Errorf("copied out: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(back, "link")); err != nil || l != "sub/deep/f.txt" {
		t.Errorf("symlink not kept: %q, %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(back, "fifo")); err == nil {
		t.Error("the FIFO was recreated on the host")
	}

	// Past the library's 100 MiB read limit: streamed with no cap, unless --max-size.
	if code, _, _ := runCLI(t, "exec", "-p", p, "dd", "if=/dev/zero", "of=/tmp/big", "bs=1048576", "count=101"); code != 0 {
		t.Fatal("dd")
	}
	big := filepath.Join(t.TempDir(), "big")
	if code, _, errOut := runCLI(t, "cp", "-p", p, ":/tmp/big", big); code != 0 {
		t.Fatalf("cp of 101 MiB: exit %d, %s", code, errOut)
	}
	if st, err := os.Stat(big); err != nil || st.Size() != 101<<20 {
		t.Errorf("copied %v, %v; want %d bytes", st, err, 101<<20)
	}
	if code, _, errOut := runCLI(t, "cp", "-p", p, "--max-size", "1000", ":/tmp/big", big); code != exitFailure || !strings.Contains(errOut, "output_limit") {
		t.Errorf("cp --max-size: exit %d, %s", code, errOut)
	}

	// A FIFO cannot hold cp past --timeout.
	if code, _, _ := runCLI(t, "exec", "-p", p, "mkfifo", "/tmp/lonely"); code != 0 {
		t.Fatal("mkfifo")
	}
	if code, _, errOut := runCLI(t, "cp", "-p", p, "--timeout", "2", ":/tmp/lonely", filepath.Join(t.TempDir(), "x")); code == 0 {
		t.Errorf("cp of a FIFO: exit 0, %s", errOut)
	}
}

// TestCpOutOfAHostileContainer: the agent replaced the container's shell with a script that
// answers every command with a crafted archive (a symlink to the host directory beside the
// destination, then a file through it; or a ../ name). cp refuses it and writes nothing outside
// its destination.
func TestCpOutOfAHostileContainer(t *testing.T) {
	o := newLib(t)
	ss := samples(t, o, uniqueTask("cphostile"), keepAlive, 2)
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	// One sample per attack: the shell is gone after the first.
	for name, entries := range map[string][]entry{
		"symlink": {{name: "l", link: outside, typ: '2'}, {name: "l/pwned", typ: '0', body: "owned"}},
		"dotdot":  {{name: "../outside/pwned", typ: '0', body: "owned"}},
	} {
		p := ss[0].Project()
		ss = ss[1:]
		hostile := filepath.Join(t.TempDir(), "hostile.tar")
		if err := os.WriteFile(hostile, tarOf(t, entries), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := runCLI(t, "cp", "-p", p, hostile, ":/hostile.tar"); code != 0 {
			t.Fatalf("cp hostile.tar in: %s", errOut)
		}
		if code, _, errOut := runCLI(t, "exec", "-p", p, "sh", "-c", "printf '#!/bin/busybox ash\\ncat /hostile.tar\\n' >/bin/sh.new && chmod +x /bin/sh.new && mv /bin/sh.new /bin/sh"); code != 0 {
			t.Fatalf("replace tar: %s", errOut)
		}
		code, _, errOut := runCLI(t, "cp", "-p", p, ":/loot", filepath.Join(base, "dst-"+name))
		if code != exitFailure || !strings.Contains(errOut, "permission_denied") {
			t.Errorf("%s: cp of a hostile archive: exit %d, %s", name, code, errOut)
		}
		if left, _ := os.ReadDir(outside); len(left) != 0 {
			t.Fatalf("%s: written outside the destination: %v", name, left)
		}
	}
}

type entry struct {
	name, link string
	typ        byte
	body       string
}

func tarOf(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
