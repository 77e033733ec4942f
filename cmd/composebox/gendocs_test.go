package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// cliReferenceDir is the checked-in CLI reference, relative to this package.
const cliReferenceDir = "../../docs/cli"

// TestCLIReferenceIsFresh regenerates the CLI reference and fails when docs/cli differs from
// it: a flag, verb or help text changed without `make docs`.
func TestCLIReferenceIsFresh(t *testing.T) {
	fresh := t.TempDir()
	if err := writeCLIReference(fresh); err != nil {
		t.Fatal(err)
	}
	want := mdFiles(t, fresh)
	got := mdFiles(t, cliReferenceDir)
	if len(want) == 0 {
		t.Fatal("the generator wrote no page")
	}
	stale := func(format string, args ...any) {
		t.Helper()
		t.Errorf("docs/cli is stale (run `make docs` and commit docs/cli): "+format, args...)
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			stale("%s is missing", name)
			continue
		}
		a, err := os.ReadFile(filepath.Join(fresh, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(cliReferenceDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			stale("%s differs from the commands' help", name)
		}
	}
	for _, name := range got {
		if !slices.Contains(want, name) {
			stale("%s documents no command", name)
		}
	}
}

// TestGendocsVerbIsHidden keeps the generator out of the help and out of the reference.
func TestGendocsVerbIsHidden(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != 0 || bytes.Contains([]byte(out), []byte("gendocs")) {
		t.Fatalf("composebox --help: exit %d, lists the generator:\n%s", code, out)
	}
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "__gendocs", dir); code != 0 {
		t.Fatalf("__gendocs: exit %d: %s", code, errOut)
	}
	for _, name := range mdFiles(t, dir) {
		if bytes.Contains([]byte(name), []byte("gendocs")) || bytes.Contains([]byte(name), []byte("reap")) {
			t.Errorf("hidden command documented: %s", name)
		}
	}
}

func mdFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m {
		names = append(names, filepath.Base(f))
	}
	slices.Sort(names)
	return names
}
