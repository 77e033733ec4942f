package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// shadowing is a project whose network takes subnet and whose service takes addr on it.
func shadowing(subnet, addr string) []byte {
	return []byte(fmt.Sprintf(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    networks:
      lan:
        ipv4_address: %s
networks:
  lan:
    ipam:
      config:
        - subnet: %s
`, addr, subnet))
}

// A compose file gives its network a subnet inside a network the host reaches (a LAN on a
// test-made interface), and its service an address there: a host client's request to that
// address would reach the sample. The sample is refused before any network exists, naming
// the host's route and the opt-in; a public subnet is refused naming the default route it
// would take addresses from. With --allow host-routes it starts.
func TestAttackSubnetShadowsHostRoute(t *testing.T) {
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	dev := testutil.HostRoute(t, "198.19.77.0/24", "198.19.77.1/24", 0)
	vpn := testutil.HostRoute(t, "10.219.88.0/24", "", 52) // a VPN's route, in a table of its own

	for _, tc := range []struct{ subnet, addr, want string }{
		{"198.19.77.0/25", "198.19.77.50", "198.19.77.0/24 dev " + dev},
		{"10.219.88.0/26", "10.219.88.10", "10.219.88.0/24 dev " + vpn + " table 52"},
		{"198.51.100.0/24", "198.51.100.10", "outside private address space"},
	} {
		t.Run(tc.subnet, func(t *testing.T) {
			task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("shadow"), YAML: shadowing(tc.subnet, tc.addr)})
			s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
			if s != nil {
				t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
			}
			if !errors.Is(err, orchestrator.ErrPolicyViolation) {
				t.Fatalf("sample on %s: err = %v, want a policy violation", tc.subnet, err)
			}
			var pe *compose.PolicyError
			if !errors.As(err, &pe) || len(pe.Violations) != 2 {
				t.Fatalf("err = %v, want the subnet and the address refused", err)
			}
			for _, want := range []string{tc.want, "--allow host-routes", "ipam.config[0].subnet", "ipv4_address"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to name %q", err, want)
				}
			}
			nets, lerr := dockerClient(t, o).NetworkList(t.Context(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelTask+"="+task.Name()))})
			if lerr != nil || len(nets) != 0 {
				t.Errorf("networks of the refused sample: %d (%v), want none", len(nets), lerr)
			}
			if routed(t, tc.subnet) {
				t.Errorf("the host has a route to %s after the refusal", tc.subnet)
			}
		})
	}

	// The operator may allow it.
	allowed := compose.DefaultPolicy()
	allowed.AllowHostRoutes = true
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("shadow-ok"), YAML: shadowing("198.19.77.0/25", "198.19.77.50"), Policy: &allowed})
	startSamples(t, task, 1)
	if !routed(t, "198.19.77.0/25") {
		t.Errorf("opted in: no route to the sample's network")
	}
}

// routed reports whether the host's main table has a route to exactly cidr.
func routed(t *testing.T, cidr string) bool {
	t.Helper()
	out, err := exec.Command("ip", "route", "show", "exact", netip.MustParsePrefix(cidr).String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out)) != ""
}
