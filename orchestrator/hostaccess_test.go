package orchestrator_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/orchestrator"
)

// These tests take the attacker's side: an agent in a sample (or a build's RUN step) tries to
// reach the host's own services and other samples' published ports. Host servers bound in the
// test process log every request, so that "nothing arrived" is asserted, not assumed.

// hostServer is an HTTP server of the host that logs every request it gets. It serves a
// secret at every path and answers like a registry would begin to, so that a pull would go on
// far enough to be seen.
type hostServer struct {
	port int
	addr string // host:port
	mu   sync.Mutex
	got  []string
}

func (h *hostServer) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// serveHost starts a server on addr ("127.0.0.1" or "0.0.0.0"), closed at the end of the test.
func serveHost(t *testing.T, addr string) *hostServer {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	h := &hostServer{port: l.Addr().(*net.TCPAddr).Port, addr: l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.got = append(h.got, r.RemoteAddr+" "+r.Method+" "+r.Host+r.URL.String())
		h.mu.Unlock()
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		_, _ = io.WriteString(w, "host-secret\n")
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

// hostAddresses are the addresses of this host's own interfaces other than loopback and the
// engine's bridges (the host's eth0 and the like), IPv4 and global IPv6.
func hostAddresses(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || i.Name == "docker0" ||
			strings.HasPrefix(i.Name, "br-") || strings.HasPrefix(i.Name, "veth") {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (ipn.IP.To4() != nil || ipn.IP.IsGlobalUnicast()) {
				out = append(out, ipn.IP.String())
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the host has no address besides loopback and the engine's bridges")
	}
	return out
}

// docker0Address is the default bridge's address on the host.
func docker0Address(t *testing.T) string {
	t.Helper()
	i, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ := i.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return ""
}

// gatewayOf is the default gateway of the sandbox's container, read from its routing table.
func gatewayOf(t *testing.T, sb *orchestrator.Sandbox) string {
	t.Helper()
	res, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"cat", "/proc/net/route"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read the routes: %v %+v", err, res)
	}
	for _, line := range strings.Split(res.StdoutText(), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[1] == "00000000" {
			v, err := strconv.ParseUint(f[2], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String()
		}
	}
	t.Fatalf("no default route in %q", res.StdoutText())
	return ""
}

// fetch tries http://ip:port/passwd from inside the sandbox and reports whether it got an answer.
func fetch(t *testing.T, sb *orchestrator.Sandbox, ip string, port int) (bool, string) {
	t.Helper()
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/passwd"
	res, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"timeout", "3", "wget", "-q", "-O", "-", url}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("exec wget %s: %v", url, err)
	}
	return res.ExitCode == 0, fmt.Sprintf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.StdoutText()+res.StderrText()))
}

const firewallTask = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["httpd", "-f", "-p", "8080", "-h", "/etc"]
    ports: ["8080"]
`

// A sample cannot reach the host's own services at its gateway, at docker0's address or at the
// host's other addresses, whether they listen on 0.0.0.0 or on 127.0.0.1, and no request reaches
// either server; its services still reach each other, and the host still reaches the sample's
// published port (replies to connections the host opened flow). With --allow host-access the
// same fetch arrives, so the test can fail. The rules go with the sample.
func TestHostFirewallKeepsSamplesOffTheHost(t *testing.T) {
	o, _ := newOrchestrator(t)
	anyAddr := serveHost(t, "0.0.0.0")
	loopback := serveHost(t, "127.0.0.1")

	task := taskInit(t, o, orchestrator.TaskSpec{Name: "hostfw-" + compose.NewSampleID(), YAML: []byte(firewallTask)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	nets := projectNetworks(t, o, s.Project())
	if len(nets) == 0 {
		t.Fatal("the sample has no network")
	}
	for _, n := range nets {
		if !hasRule(t, n) {
			t.Errorf("network %s (%s) has no host firewall rule", n.Name, n.ID)
		}
	}

	sb := s.Default()
	targets := append([]string{gatewayOf(t, sb), docker0Address(t)}, hostAddresses(t)...)
	for _, ip := range targets {
		for _, srv := range []*hostServer{anyAddr, loopback} {
			if ok, out := fetch(t, sb, ip, srv.port); ok {
				t.Errorf("the sample fetched the host's server at %s:%d: %q", ip, srv.port, out)
			}
		}
	}
	if got := anyAddr.requests(); len(got) != 0 {
		t.Errorf("requests reached the host's 0.0.0.0 server: %v", got)
	}
	if got := loopback.requests(); len(got) != 0 {
		t.Errorf("requests reached the host's 127.0.0.1 server: %v", got)
	}

	// Within the sample, and from the host to the sample, nothing changes.
	if ok, out := fetch(t, sb, "web", 8080); !ok || !strings.Contains(out, "root:") {
		t.Errorf("default -> web: %v %q", ok, out)
	}
	conn, err := mustSandbox(t, s, "web").Connection(t.Context())
	if err != nil || len(conn.Ports) != 1 {
		t.Fatalf("connection of web: %+v, %v", conn, err)
	}
	if body := httpGet(t, fmt.Sprintf("http://%s:%d/passwd", conn.Ports[0].HostIP, conn.Ports[0].HostPort)); !strings.Contains(body, "root:") {
		t.Errorf("the host fetched web's published port: %q", body)
	}

	// The control: the same task opted in to host access reaches the 0.0.0.0 server.
	p := compose.DefaultPolicy()
	p.AllowHostAccess = true
	open := taskInit(t, o, orchestrator.TaskSpec{Name: "hostfw-open-" + compose.NewSampleID(), YAML: []byte(firewallTask), Policy: &p})
	so, err := open.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = so.Cleanup(context.Background()) })
	if ok, out := fetch(t, so.Default(), gatewayOf(t, so.Default()), anyAddr.port); !ok || !strings.Contains(out, "host-secret") {
		t.Errorf("with host-access the sample did not reach the host's server: %v %q", ok, out)
	}
	if len(anyAddr.requests()) == 0 {
		t.Error("with host-access no request reached the host's server: the test cannot tell")
	}
	for _, n := range projectNetworks(t, o, so.Project()) {
		if hasRule(t, n) {
			t.Errorf("network %s of a host-access sample has a firewall rule", n.Name)
		}
	}

	// The rules live as long as their networks.
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		if hasRule(t, n) {
			t.Errorf("the rule of network %s outlived it", n.Name)
		}
	}
}

// Every published port, whatever form the file gives it in, binds 127.0.0.1: the engine reports
// no binding on 0.0.0.0 or ::, Connection reports the engine's, and another sample (opted in to
// host access, so that only the binding stands in its way) cannot fetch it at its gateway,
// docker0's address or the host's other addresses.
func TestPublishedPortsBindLoopback(t *testing.T) {
	o, _ := newOrchestrator(t)
	victim := taskInit(t, o, orchestrator.TaskSpec{Name: "ports-" + compose.NewSampleID(), YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["httpd", "-f", "-p", "8080", "-h", "/etc"]
    ports:
      - "8080"
      - "1337:8081"
      - "9000-9001:8082-8083"
      - "8084/udp"
      - target: 8085
      - target: 8086
        published: "1338"
`)})
	s, err := victim.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	info, err := dockerClient(t, o).ContainerInspect(t.Context(), s.Default().ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	bound := 0
	httpPort := 0
	for port, bindings := range info.NetworkSettings.Ports {
		for _, b := range bindings {
			bound++
			if b.HostIP != "127.0.0.1" {
				t.Errorf("%s published on %q, want 127.0.0.1", port, b.HostIP)
			}
			if port.Port() == "8080" {
				httpPort, _ = strconv.Atoi(b.HostPort)
			}
		}
	}
	if bound != 7 {
		t.Errorf("%d bindings, want 7: %v", bound, info.NetworkSettings.Ports)
	}
	conn, err := s.Default().Connection(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(conn.Ports) != 7 {
		t.Errorf("Connection ports %+v, want 7", conn.Ports)
	}
	for _, p := range conn.Ports {
		if p.HostIP != "127.0.0.1" || p.HostPort == 0 {
			t.Errorf("Connection port %+v, want one on 127.0.0.1", p)
		}
	}
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/passwd", httpPort)); !strings.Contains(body, "root:") {
		t.Fatalf("the host cannot fetch the published port: %q", body)
	}

	p := compose.DefaultPolicy()
	p.AllowHostAccess = true
	attacker := taskInit(t, o, orchestrator.TaskSpec{Name: "ports-attacker-" + compose.NewSampleID(), Policy: &p, YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`)})
	a, err := attacker.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Cleanup(context.Background()) })
	for _, ip := range append([]string{gatewayOf(t, a.Default()), docker0Address(t)}, hostAddresses(t)...) {
		if ok, out := fetch(t, a.Default(), ip, httpPort); ok {
			t.Errorf("another sample fetched the published port at %s:%d: %q", ip, httpPort, out)
		}
	}
}

func projectNetworks(t *testing.T, o *orchestrator.Orchestrator, project string) []network.Summary {
	t.Helper()
	nets, err := dockerClient(t, o).NetworkList(t.Context(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.ComposeProjectLabel+"="+project))})
	if err != nil {
		t.Fatal(err)
	}
	return nets
}

func hasRule(t *testing.T, n network.Summary) bool {
	t.Helper()
	rules, err := hostfw.New().Rules()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(rules, func(r hostfw.Rule) bool { return r.ID == n.ID && r.Bridge == hostfw.BridgeName(n.ID, n.Options) })
}

// A build's RUN steps run on the firewalled build network: a Dockerfile that fetches the host's
// server at its gateway, docker0's address and the host's other addresses gets nothing, and no
// request arrives. With --allow host-access the same build reaches the server.
func TestHostFirewallCoversBuilds(t *testing.T) {
	o, _ := newOrchestrator(t)
	srv := serveHost(t, "0.0.0.0")
	targets := append([]string{docker0Address(t)}, hostAddresses(t)...)
	var script strings.Builder
	// The gateway of whatever network the build runs on, from the routing table.
	script.WriteString(`gw=$(awk '$2=="00000000"{h=$3; printf "%d.%d.%d.%d", "0x" substr(h,7,2), "0x" substr(h,5,2), "0x" substr(h,3,2), "0x" substr(h,1,2)}' /proc/net/route); `)
	for _, ip := range append([]string{"$gw"}, targets...) {
		if strings.Contains(ip, ":") {
			ip = "[" + ip + "]"
		}
		fmt.Fprintf(&script, "timeout 3 wget -q -O - http://%s:%d/build >> /loot 2>&1; ", ip, srv.port)
	}
	build := func(name string, p *compose.Policy) error {
		// The nonce makes each build new: a cached image would run no step at all.
		yml := fmt.Sprintf(`
services:
  default:
    build:
      context: .
      dockerfile_inline: |
        FROM ${COMPOSEBOX_BASE_IMAGE}
        RUN echo %s; %s true
    command: ["tail", "-f", "/dev/null"]
`, compose.NewSampleID(), strings.ReplaceAll(script.String(), "$", "$$"))
		removeTaskImages(t, o, name)
		task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, YAML: []byte(yml), Policy: p})
		if task != nil {
			t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
		}
		return err
	}
	if err := build("hostfw-build-"+compose.NewSampleID(), nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.requests(); len(got) != 0 {
		t.Errorf("a build's RUN step reached the host's server: %v", got)
	}
	p := compose.DefaultPolicy()
	p.AllowHostAccess = true
	if err := build("hostfw-build-open-"+compose.NewSampleID(), &p); err != nil {
		t.Fatal(err)
	}
	if len(srv.requests()) == 0 {
		t.Error("with host-access the build reached nothing either: the test cannot tell")
	}
}
