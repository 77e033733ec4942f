package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/orchestrator"
)

// linksTask is compose's own TestNetworkLinks fixture (network_mode: bridge with links) on the
// base image: container1 serves /etc over HTTP, container2 reaches it through its links, by
// the service's name and by a link alias.
const linksTask = `
services:
  container1:
    image: ${COMPOSEBOX_BASE_IMAGE}
    network_mode: bridge
    command: ["httpd", "-f", "-p", "80", "-h", "/etc"]
  container2:
    image: ${COMPOSEBOX_BASE_IMAGE}
    network_mode: bridge
    command: ["tail", "-f", "/dev/null"]
    links:
      - container1
      - container1:web1
    x-default: true
`

// network_mode: bridge runs without any opt-in, on a bridge network of the sample's own that
// the host firewall covers: links work (by name and by alias), the sample cannot reach the
// host's servers at its gateway, docker0's address or the host's other addresses, and no
// request arrives. The engine's shared bridge is for a service that asks for it with
// x-composebox-engine-bridge, which needs host-access: refused without it, and on docker0
// with it, so the test tells the two apart.
func TestNetworkModeBridgeIsTheSamplesOwnFirewalledNetwork(t *testing.T) {
	o, _ := newOrchestrator(t)
	anyAddr := serveHost(t, "0.0.0.0")
	loopback := serveHost(t, "127.0.0.1")

	task := taskInit(t, o, orchestrator.TaskSpec{Name: "links-" + compose.NewSampleID(), YAML: []byte(linksTask)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	sb := mustSandbox(t, s, "container2")
	for _, name := range []string{"container1", "web1"} {
		if ok, out := fetch(t, sb, name, 80); !ok || !strings.Contains(out, "root:") {
			t.Errorf("container2 -> %s (a link): %v %q", name, ok, out)
		}
	}
	info, err := dockerClient(t, o).ContainerInspect(t.Context(), sb.ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	mode := string(info.HostConfig.NetworkMode)
	if mode != s.Project()+"_default" {
		t.Errorf("network mode %q: want the sample's own network %s_default, not the engine's bridge", mode, s.Project())
	}
	nets := projectNetworks(t, o, s.Project())
	if len(nets) != 1 || !hasRule(t, nets[0]) {
		t.Errorf("the sample's networks %v: want one, with a host firewall rule", nets)
	}
	targets := append([]string{gatewayOf(t, sb), docker0Address(t)}, hostAddresses(t)...)
	for _, ip := range targets {
		for _, srv := range []*hostServer{anyAddr, loopback} {
			if ok, out := fetch(t, sb, ip, srv.port); ok {
				t.Errorf("the sample fetched the host's server at %s:%d: %q", ip, srv.port, out)
			}
		}
	}
	if got := append(anyAddr.requests(), loopback.requests()...); len(got) != 0 {
		t.Errorf("requests reached the host's servers: %v", got)
	}

	// The engine's shared bridge, asked for: refused without host-access, naming it.
	engine := strings.Replace(linksTask, "    links:", "    x-composebox-engine-bridge: true\n    links:", 1)
	engine = strings.Replace(engine, "    command: [\"httpd\"", "    x-composebox-engine-bridge: true\n    command: [\"httpd\"", 1)
	err = taskInitErr(t, o, orchestrator.TaskSpec{Name: "links-engine-" + compose.NewSampleID(), YAML: []byte(engine)})
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "--allow host-access") ||
		!strings.Contains(err.Error(), compose.EngineBridgeExtension) {
		t.Errorf("the engine's bridge without host-access: %v, want a policy violation naming --allow host-access", err)
	}
	p := compose.DefaultPolicy()
	p.AllowHostAccess = true
	open := taskInit(t, o, orchestrator.TaskSpec{Name: "links-engine-" + compose.NewSampleID(), YAML: []byte(engine), Policy: &p})
	so, err := open.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = so.Cleanup(context.Background()) })
	osb := mustSandbox(t, so, "container2")
	if info, err := dockerClient(t, o).ContainerInspect(t.Context(), osb.ContainerID()); err != nil || info.HostConfig.NetworkMode != "bridge" {
		t.Errorf("with the extension and host-access: network mode %v (%v), want the engine's bridge", info.HostConfig, err)
	}
	if ok, out := fetch(t, osb, "web1", 80); !ok || !strings.Contains(out, "root:") {
		t.Errorf("on the engine's bridge, container2 -> web1 (a legacy link): %v %q", ok, out)
	}
}
