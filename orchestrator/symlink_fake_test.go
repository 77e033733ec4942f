package orchestrator_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// TaskInit of a task directory whose compose.yaml is a symlink to a host file refuses it
// before reading it: the error holds nothing of the file.
func TestFakeTaskInitSymlinkedComposeFileLeaksNothing(t *testing.T) {
	_, o, _ := newFake(t)
	dir, _ := testutil.SymlinkedTask(t, "root:$6$LIBRARY-SECRET-HASH:19000:0:99999:7:::")
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Path: dir})
	if task != nil {
		t.Cleanup(func() { _ = task.Cleanup(t.Context()) })
	}
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || strings.Contains(err.Error(), "LIBRARY-SECRET") {
		t.Fatalf("err = %v, want a policy violation without the file's contents", err)
	}
}
