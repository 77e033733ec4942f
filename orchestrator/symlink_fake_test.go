package orchestrator_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/orchestrator"
)

// TaskInit of a task directory whose compose.yaml is a symlink to a host file refuses it
// before reading it: the error holds nothing of the file.
func TestFakeTaskInitSymlinkedComposeFileLeaksNothing(t *testing.T) {
	_, o, _ := newFake(t)
	const secret = "root:$6$LIBRARY-SECRET-HASH:19000:0:99999:7:::"
	hostFile := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(hostFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(hostFile, filepath.Join(dir, "compose.yaml")); err != nil {
		t.Fatal(err)
	}
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Path: dir})
	if task != nil {
		t.Cleanup(func() { _ = task.Cleanup(t.Context()) })
	}
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || strings.Contains(err.Error(), "LIBRARY-SECRET") {
		t.Fatalf("err = %v, want a policy violation without the file's contents", err)
	}
}
