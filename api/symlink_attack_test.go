package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
)

// A client names, as its task, a directory whose compose.yaml is a symlink to a host file, or
// the host file itself: the 422 body says where the file resolves and which flag would allow
// it, and holds nothing of the file.
func TestFakeServerSymlinkedTaskPathLeaksNothing(t *testing.T) {
	ts, _ := startFakeServer(t)
	lease := ts.lease(t)
	const secret = "root:$6$SERVER-SIDE-SECRET-HASH:19000:0:99999:7:::"
	task, _ := testutil.SymlinkedTask(t, secret)
	direct, err := os.CreateTemp("", "cbx-api-shadow-*") // directly in /tmp: no task root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(direct.Name()) })
	if _, err := direct.WriteString(secret + "\n"); err != nil {
		t.Fatal(err)
	}
	_ = direct.Close()

	for _, path := range []string{task, filepath.Join(task, "compose.yaml"), direct.Name()} {
		r := ts.do(t, "POST", "/v1/tasks", jsonBody(t, TaskRequest{Name: "thief", Path: path}), map[string]string{leaseHeader: lease})
		e := r.wantError(t, http.StatusUnprocessableEntity, "policy_violation")
		if strings.Contains(string(r.body), "SERVER-SIDE-SECRET") || strings.Contains(string(r.body), "daemon:") {
			t.Fatalf("path %s: the error body carries the host file: %s", path, r.body)
		}
		if !strings.Contains(e.Message, "--allow-mount-root") {
			t.Errorf("path %s: %q, want the flag that would allow it", path, e.Message)
		}
	}
}
