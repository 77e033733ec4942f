package hostdir

import (
	"os"
	"path/filepath"
	"testing"
)

// MakeInert makes a directory nosuid and nodev on the host, keeps what was already there, and
// Release leaves it as it was; both are idempotent.
func TestMakeInertAndRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := filepath.Join(t.TempDir(), "sample")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Release(dir) })
	if inert, err := Inert(dir); err != nil || inert {
		t.Skipf("the test's directory is already nosuid,nodev (%v): nothing to show", err)
	}
	for range 2 {
		if err := MakeInert(dir); err != nil {
			t.Fatal(err)
		}
		if inert, err := Inert(dir); err != nil || !inert {
			t.Fatalf("after MakeInert: inert = %v, %v", inert, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kept")); err != nil || string(b) != "x" {
		t.Errorf("the directory's contents through the mount: %q, %v", b, err)
	}
	if !mountRoot(dir) {
		t.Errorf("not a mount point after MakeInert")
	}
	for range 2 {
		if err := Release(dir); err != nil {
			t.Fatal(err)
		}
	}
	if inert, err := Inert(dir); err != nil || inert || mountRoot(dir) {
		t.Errorf("after Release: inert = %v (%v), mount point = %v", inert, err, mountRoot(dir))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove after Release: %v", err)
	}
	if err := Release(filepath.Join(dir, "gone")); err != nil {
		t.Errorf("Release of a missing directory: %v", err)
	}
}
