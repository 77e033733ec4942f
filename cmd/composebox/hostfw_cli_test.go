package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/testutil"
)

// helperCLIArgsEnv carries the arguments of TestHelperCLI: this test binary re-run as the CLI,
// so that a test can start it with fewer privileges than its own.
const helperCLIArgsEnv = "CBX_TEST_CLI_ARGS"

func TestHelperCLI(t *testing.T) {
	raw := os.Getenv(helperCLIArgsEnv)
	if raw == "" {
		t.Skip("run by the tests that need the CLI in a process of its own")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(context.Background(), args, strings.NewReader(""), os.Stdout, os.Stderr))
}

// A host where the firewall's rules cannot be applied (here: root without CAP_NET_ADMIN, as in
// a container or under a restricted service manager) must not start a sample unprotected: up
// fails as a prerequisite, names the opt-out, and leaves nothing behind.
func TestUpFailsClosedWithoutHostFirewall(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to drop CAP_NET_ADMIN")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to drop only CAP_NET_ADMIN")
	}
	c := testutil.Docker(t)
	task := uniqueTask("nofw")
	removeTaskProjects(t, c, task)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(twoServices), 0o644); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]string{"up", "--task", task, dir})
	cmd := exec.CommandContext(t.Context(), setpriv, "--bounding-set=-net_admin", "--inh-caps=-net_admin",
		os.Args[0], "-test.run=^TestHelperCLI$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperCLIArgsEnv+"="+string(args), "COMPOSEBOX_BASE_IMAGE="+testutil.BaseImage(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("up without CAP_NET_ADMIN succeeded: %s", out)
	}
	msg := stderr.String()
	t.Logf("up without CAP_NET_ADMIN: %s", msg)
	if !strings.Contains(msg, "--allow host-access") || !strings.Contains(msg, "prerequisite") {
		t.Errorf("up without the firewall: want a prerequisite error naming --allow host-access, got:\n%s", msg)
	}
	if n := strings.Count(msg, "--allow host-access"); n != 1 {
		t.Errorf("the opt-out is named %d times, want once:\n%s", n, msg)
	}
	if strings.Contains(msg, "composebox: warn: ") {
		t.Errorf("the failed sample's teardown warned:\n%s", msg)
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources of the task left after up failed closed", n)
	}
}
