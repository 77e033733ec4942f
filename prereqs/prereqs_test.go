package prereqs

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/subnets"
	"github.com/composebox/composebox/internal/testutil"
)

func TestDoctorPassesAgainstLiveDaemon(t *testing.T) {
	testutil.BaseImage(t)
	r := Doctor(t.Context(), Options{})
	if !r.OK {
		t.Fatalf("doctor failed against the live daemon: %+v", r.Checks)
	}
	names := map[string]Status{}
	for _, c := range r.Checks {
		names[c.Name] = c.Status
	}
	for _, want := range []string{"daemon", "api_version", "storage_driver", "base_image", "address_pools", "disk", "host_firewall"} {
		if _, ok := names[want]; !ok {
			t.Errorf("no %s check in %+v", want, r.Checks)
		}
	}
	if names["base_image"] != Pass {
		t.Errorf("base_image is %s after building it", names["base_image"])
	}
	if names["host_firewall"] != Pass {
		t.Errorf("host_firewall is %s as root with nftables", names["host_firewall"])
	}
	// Opted out, the same firewall is a warning: samples reach the host.
	for _, c := range Doctor(t.Context(), Options{HostAccess: true}).Checks {
		if c.Name == "host_firewall" && (c.Status != Warn || !strings.Contains(c.Detail, "host-access")) {
			t.Errorf("host_firewall with host-access: %s", c)
		}
	}
}

func TestDoctorFailsFastWithoutDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	start := time.Now()
	r := Doctor(t.Context(), Options{})
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("doctor took %s without a daemon", d)
	}
	if r.OK || r.Checks[0].Name != "daemon" || r.Checks[0].Status != Fail {
		t.Fatalf("want a failed daemon check first, got %+v", r.Checks)
	}
	if !strings.Contains(r.Checks[0].String(), "make docker") {
		t.Errorf("daemon failure does not say how to start one: %s", r.Checks[0])
	}
}

func TestRequireLiveDaemon(t *testing.T) {
	c := testutil.Docker(t)
	info, err := Require(t.Context(), c, 0)
	if err != nil || info.APIVersion == "" {
		t.Fatalf("Require = %+v, %v", info, err)
	}
}

func TestFreeSlots(t *testing.T) {
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	cases := []struct {
		name      string
		used      []netip.Prefix
		wantFree  int
		wantTotal int
	}{
		{"empty", nil, 31, 31},
		{"docker0", []netip.Prefix{p("172.17.0.0/16")}, 30, 31},
		{"small net inside a slot", []netip.Prefix{p("172.21.3.0/27")}, 30, 31},
		{"two in one slot", []netip.Prefix{p("192.168.0.0/24"), p("192.168.1.0/24")}, 30, 31},
		{"outside pools", []netip.Prefix{p("10.0.0.0/8")}, 31, 31},
		{"a big net covering slots", []netip.Prefix{p("172.20.0.0/14")}, 27, 31},
	}
	for _, c := range cases {
		free, total := FreeSlots(subnets.DaemonDefaults, c.used)
		if free != c.wantFree || total != c.wantTotal {
			t.Errorf("%s: free %d/%d, want %d/%d", c.name, free, total, c.wantFree, c.wantTotal)
		}
	}
}

func TestManagedSubnetsCheck(t *testing.T) {
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	cases := []struct {
		name   string
		opts   SubnetOptions
		used   []netip.Prefix
		status Status
		detail string
	}{
		{"default pool", SubnetOptions{}, nil, Pass, "2048 more sample networks from 10.213.0.0/16 as /27s"},
		{"half used", SubnetOptions{Pool: p("10.9.0.0/24"), Bits: 26}, []netip.Prefix{p("10.9.0.0/25")}, Warn, "2 more sample networks"},
		{"full", SubnetOptions{Pool: p("10.9.0.0/26"), Bits: 26}, []netip.Prefix{p("10.9.0.0/26")}, Fail, "0 more"},
		{"overlaps daemon pools", SubnetOptions{Pool: p("172.20.0.0/16")}, nil, Warn, "overlaps the daemon's default pools 172.20.0.0/14"},
		{"off", SubnetOptions{Disabled: true}, nil, Warn, "off"},
		{"invalid", SubnetOptions{Bits: 31}, nil, Fail, "too small"},
	}
	for _, c := range cases {
		got := managedCheck(c.opts, c.used, false)
		if got.Status != c.status || !strings.Contains(got.Detail, c.detail) {
			t.Errorf("%s: %s", c.name, got)
		}
	}
}

func TestDoctorReportsEachPool(t *testing.T) {
	testutil.Docker(t)
	r := Doctor(t.Context(), Options{})
	byName := map[string]Check{}
	for _, c := range r.Checks {
		byName[c.Name] = c
	}
	if c := byName["address_pools"]; !strings.Contains(c.Detail, "172.17.0.0/16 as /16") || !strings.Contains(c.Detail, "192.168.0.0/16 as /20") {
		t.Errorf("address_pools does not list each default pool: %s", c)
	}
	if c := byName["managed_subnets"]; c.Status == Fail || !strings.Contains(c.Detail, "from 10.213.0.0/16 as /27s") {
		t.Errorf("managed_subnets: %s", c)
	}
}
