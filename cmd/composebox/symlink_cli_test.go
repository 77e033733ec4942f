package main

import (
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
)

// `composebox config DIR` on a task whose compose.yaml is a symlink to a host file refuses it
// without reading it: stderr names the rule and the flag, and holds nothing of the file.
func TestConfigSymlinkedComposeFileLeaksNothing(t *testing.T) {
	task, hostFile := testutil.SymlinkedTask(t, "root:$6$CLI-SECRET-HASH-never-printed:19000:0:99999:7:::")
	code, out, errOut := runConfigCLI(t, "config", task)
	if code == exitOK || strings.Contains(out+errOut, "CLI-SECRET-HASH") {
		t.Fatalf("config %s: exit %d, stdout %q, stderr %q; want a refusal without the file's contents", task, code, out, errOut)
	}
	for _, want := range []string{"policy_violation", hostFile, "--allow-mount-root"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not mention %q", errOut, want)
		}
	}
}
