package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `composebox config DIR` on a task whose compose.yaml is a symlink to a host file refuses it
// without reading it: stderr names the rule and the flag, and holds nothing of the file.
func TestConfigSymlinkedComposeFileLeaksNothing(t *testing.T) {
	const secret = "root:$6$CLI-SECRET-HASH-never-printed:19000:0:99999:7:::"
	hostFile := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(hostFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := t.TempDir()
	if err := os.Symlink(hostFile, filepath.Join(task, "compose.yaml")); err != nil {
		t.Fatal(err)
	}
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
