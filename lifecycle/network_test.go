package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/subnets"
	"github.com/composebox/composebox/internal/testutil"
)

// testPool gives each test its own corner of 10.214/16, far from the default pool, so that
// tests running in parallel packages never compete with each other or with real samples.
func testPool(t *testing.T, base string, bits int) subnets.Pool {
	t.Helper()
	p, err := subnets.Parse(base, bits)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// occupy creates a labelled network on subnet, as another process would.
func occupy(t *testing.T, c client.APIClient, subnet string) {
	t.Helper()
	name := fmt.Sprintf("cbx-occupy-%d", time.Now().UnixNano()%1e9)
	resp, err := c.NetworkCreate(t.Context(), name, network.CreateOptions{
		Labels: testutil.Labels(t),
		IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}},
	})
	if err != nil {
		t.Fatalf("occupy %s: %v", subnet, err)
	}
	t.Cleanup(func() { _ = c.NetworkRemove(context.Background(), resp.ID) })
}

func networkSubnets(t *testing.T, c client.APIClient, project string) []string {
	t.Helper()
	list, err := c.NetworkList(t.Context(), network.ListOptions{Filters: cleanup.ProjectFilter(project)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list {
		for _, cfg := range n.IPAM.Config {
			out = append(out, cfg.Subnet)
		}
	}
	return out
}

func TestManagedSubnetFromPool(t *testing.T) {
	c := testutil.Docker(t)
	base := testutil.BaseImage(t)
	pool := testPool(t, "10.214.0.0/24", 27)
	e, err := New(c, WithSubnets(Subnets{Pool: pool.Base, Bits: pool.Bits}))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cbx-subnet-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	p := smokeProject(t, name, base, map[string]types.ServiceConfig{
		"default": {Command: []string{"tail", "-f", "/dev/null"}},
		"peer":    {Command: []string{"tail", "-f", "/dev/null"}},
	})
	if err := e.Up(t.Context(), p, UpOptions{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	got := networkSubnets(t, c, name)
	if len(got) != 1 {
		t.Fatalf("project networks' subnets = %v, want one", got)
	}
	s := netip.MustParsePrefix(got[0])
	if s.Bits() != 27 || !pool.Base.Overlaps(s) {
		t.Fatalf("subnet %s is not a /27 of %s", s, pool.Base)
	}
	// The containers sit on it and reach each other by name.
	states, err := e.Wait(t.Context(), p, WaitOptions{})
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	for _, st := range states {
		ci, err := c.ContainerInspect(t.Context(), st.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range ci.NetworkSettings.Networks {
			if ip, err := netip.ParseAddr(ep.IPAddress); err != nil || !s.Contains(ip) {
				t.Errorf("%s has address %q, outside %s", st.Service, ep.IPAddress, s)
			}
		}
	}
}

// Another process took the first candidate between our list and our create: the daemon
// refuses the overlap and the next candidate is used.
func TestManagedSubnetConflictRetry(t *testing.T) {
	c := testutil.Docker(t)
	pool := testPool(t, "10.214.1.0/25", 27)
	occupy(t, c, pool.Nth(0).String())
	e, err := New(c, WithSubnets(Subnets{Pool: pool.Base, Bits: pool.Bits}))
	if err != nil {
		t.Fatal(err)
	}
	e.alloc.recent = map[netip.Prefix]time.Time{} // start at the pool's first subnet
	name := fmt.Sprintf("cbx-conflict-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	p := smokeProject(t, name, "unused", map[string]types.ServiceConfig{"default": {}})
	// A stale view (nothing used), as if the occupying network appeared after the list.
	used, _, err := e.createNetwork(t.Context(), p, "default", nil)
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	got := networkSubnets(t, c, name)
	if len(got) != 1 || got[0] != pool.Nth(1).String() {
		t.Fatalf("subnets = %v, want [%s] after the conflict on %s", got, pool.Nth(1), pool.Nth(0))
	}
	if !subnets.Overlaps(pool.Nth(0), used) {
		t.Errorf("the refused subnet is not marked used: %v", used)
	}
	if cfg := p.Networks["default"].Ipam.Config; len(cfg) != 1 || cfg[0].Subnet != got[0] {
		t.Errorf("project network IPAM = %+v, want the subnet created", cfg)
	}
}

func TestManagedSubnetPoolFull(t *testing.T) {
	c := testutil.Docker(t)
	pool := testPool(t, "10.214.2.0/27", 27) // a single subnet
	occupy(t, c, pool.Nth(0).String())
	e, err := New(c, WithSubnets(Subnets{Pool: pool.Base, Bits: pool.Bits}))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cbx-full-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	p := smokeProject(t, name, "unused", map[string]types.ServiceConfig{"default": {}})
	err = e.Up(t.Context(), p, UpOptions{})
	if !errors.Is(err, ErrAddressPool) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("up = %v, want ErrAddressPool", err)
	}
	for _, want := range []string{"10.214.2.0/27", "--subnet-pool", "backends.Config.Subnets"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := networkSubnets(t, c, name); len(got) != 0 {
		t.Errorf("networks left after a failed allocation: %v", got)
	}
}

// A user network with its own IPAM, and an external one, are not composebox's to number.
func TestManagedSubnetLeavesUserIPAMAlone(t *testing.T) {
	c := testutil.Docker(t)
	base := testutil.BaseImage(t)
	e, err := New(c, WithSubnets(Subnets{Pool: netip.MustParsePrefix("10.214.3.0/24")}))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cbx-useripam-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	p := smokeProject(t, name, base, map[string]types.ServiceConfig{"default": {Command: []string{"tail", "-f", "/dev/null"}}})
	n := p.Networks["default"]
	n.Ipam = types.IPAMConfig{Config: []*types.IPAMPool{{Subnet: "10.215.9.0/28"}}}
	p.Networks["default"] = n
	if err := e.Up(t.Context(), p, UpOptions{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	if got := networkSubnets(t, c, name); len(got) != 1 || got[0] != "10.215.9.0/28" {
		t.Fatalf("subnets = %v, want the user's 10.215.9.0/28", got)
	}
}

// With network_mode: none everywhere there is nothing to number, and nothing is created.
func TestNetworkModeNoneCreatesNoNetwork(t *testing.T) {
	c := testutil.Docker(t)
	base := testutil.BaseImage(t)
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cbx-nonet-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	p := smokeProject(t, name, base, map[string]types.ServiceConfig{
		"default": {Command: []string{"tail", "-f", "/dev/null"}, NetworkMode: "none"},
	})
	p.Networks = nil
	for n, s := range p.Services {
		s.Networks = nil
		p.Services[n] = s
	}
	if err := e.Up(t.Context(), p, UpOptions{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	list, err := c.NetworkList(t.Context(), network.ListOptions{Filters: cleanup.ProjectFilter(name)})
	if err != nil || len(list) != 0 {
		t.Fatalf("networks of a network_mode: none project = %d (%v), want 0", len(list), err)
	}
}

func TestPoolExhaustedMessages(t *testing.T) {
	for _, msg := range []string{
		// Engine 20.10, then later engines.
		"Error response from daemon: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network",
		"Error response from daemon: all predefined address pools have been fully subnetted",
	} {
		cause := errors.New(msg)
		if !poolExhausted(cause) {
			t.Errorf("not recognised as pool exhaustion: %q", msg)
		}
		err := addressPoolError("cbx-x", cause)
		if !errors.Is(err, ErrAddressPool) || !errors.Is(err, cause) {
			t.Errorf("wrapped error %v lost its category or cause", err)
		}
		for _, want := range []string{"default-address-pools", "--subnet-pool", "exhausted"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
	if poolExhausted(errors.New("Pool overlaps with other one on this address space")) {
		t.Error("an overlap is not exhaustion")
	}
}

// A host route in a routing table of its own (a VPN's, say) that lies in composebox's pool: the
// subnets overlapping it are skipped, and once the rest are taken the pool is full, naming
// the host's routes.
func TestManagedSubnetSkipsHostRoutesOfEveryTable(t *testing.T) {
	c := testutil.Docker(t)
	testutil.HostRoute(t, "10.219.77.0/24", "", 52)
	pool := testPool(t, "10.219.76.0/23", 25) // four /25s, two of them under the route
	e, err := New(c, WithSubnets(Subnets{Pool: pool.Base, Bits: pool.Bits}))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cbx-routes-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	p := smokeProject(t, name, "unused", map[string]types.ServiceConfig{"default": {}})
	for _, k := range []string{"a", "b", "c"} {
		p.Networks[k] = types.NetworkConfig{Name: name + "_" + k, Labels: testutil.Labels(t)}
	}
	delete(p.Networks, "default")
	_, err = e.createNetworks(t.Context(), p)
	if !errors.Is(err, ErrAddressPool) || !strings.Contains(err.Error(), "host's routes") {
		t.Errorf("a third network from the two subnets clear of the route: err = %v, want ErrAddressPool naming the host's routes", err)
	}
	got := networkSubnets(t, c, name)
	if len(got) != 2 {
		t.Fatalf("subnets = %v, want the two clear of the route", got)
	}
	for _, s := range got {
		if netip.MustParsePrefix(s).Overlaps(netip.MustParsePrefix("10.219.77.0/24")) {
			t.Errorf("managed subnet %s shadows the host's route to 10.219.77.0/24", s)
		}
	}
}
