package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// SymlinkedTask makes a host file holding secret (a line of /etc/shadow's format, say) outside
// any task, and a task directory of the test's own whose compose.yaml is a symlink to it, as an
// attacker who writes task directories would. It returns the task directory and the host file.
func SymlinkedTask(t testing.TB, secret string) (task, hostFile string) {
	t.Helper()
	hostFile = filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(hostFile, []byte(secret+"\ndaemon:*:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	task = t.TempDir()
	if err := os.Symlink(hostFile, filepath.Join(task, "compose.yaml")); err != nil {
		t.Fatal(err)
	}
	return task, hostFile
}
