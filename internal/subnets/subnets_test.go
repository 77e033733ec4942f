package subnets

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultPoolAvoidsDaemonDefaults(t *testing.T) {
	if err := Default.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, d := range DaemonDefaults {
		if d.Base.Overlaps(Default.Base) {
			t.Errorf("default pool %s overlaps daemon pool %s", Default.Base, d.Base)
		}
	}
	if got := Default.Size(); got != 2048 {
		t.Errorf("default pool holds %d subnets, want 2048", got)
	}
}

func TestNthAndFree(t *testing.T) {
	p, err := Parse("10.1.0.0/24", 27)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size() != 8 {
		t.Fatalf("size %d, want 8", p.Size())
	}
	if got := p.Nth(3).String(); got != "10.1.0.96/27" {
		t.Errorf("Nth(3) = %s", got)
	}
	used := []netip.Prefix{
		netip.MustParsePrefix("10.1.0.0/26"),    // covers two slots
		netip.MustParsePrefix("10.1.0.200/30"),  // inside slot 6
		netip.MustParsePrefix("172.17.0.0/16"),  // elsewhere
		netip.MustParsePrefix("10.0.0.0/8"),     // covers everything...
		netip.MustParsePrefix("192.168.0.0/20"), // elsewhere
	}
	if got := p.Free(used[:3]); got != 5 {
		t.Errorf("free = %d, want 5", got)
	}
	if got := p.Free(used); got != 0 {
		t.Errorf("free with 10/8 used = %d, want 0", got)
	}
}

func TestParseRejects(t *testing.T) {
	for _, c := range []struct {
		base string
		bits int
		want string
	}{
		{"nonsense", 27, "subnet pool"},
		{"10.0.0.0/24", 16, "do not fit"},
		{"10.0.0.0/16", 31, "too small"},
		{"fd00::/64", 80, "IPv4"},
	} {
		_, err := Parse(c.base, c.bits)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %d) = %v, want an error containing %q", c.base, c.bits, err, c.want)
		}
	}
}

func TestParseRoutes(t *testing.T) {
	const table = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	010200C0	0003	0	0	0	00000000	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
`
	got, err := parseRoutes(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"172.17.0.0/16", "192.0.2.0/24"}
	if len(got) != len(want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("route %d = %s, want %s", i, got[i], want[i])
		}
	}
	if _, err := HostRoutes(); err != nil {
		t.Errorf("host routes: %v", err)
	}
}

func TestDaemonPools(t *testing.T) {
	dir := t.TempDir()
	if p, src := DaemonPools(filepath.Join(dir, "missing.json")); src != "engine defaults" || len(p) != len(DaemonDefaults) {
		t.Errorf("missing file: %v from %s", p, src)
	}
	path := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(path, []byte(`{"default-address-pools":[{"base":"10.200.0.0/16","size":24}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, src := DaemonPools(path)
	if src != path || len(p) != 1 || p[0].Size() != 256 {
		t.Errorf("configured pools: %v from %s", p, src)
	}
}

func TestPrivateAndShadowed(t *testing.T) {
	for s, want := range map[string]bool{
		"10.213.0.0/16": true, "172.20.0.0/16": true, "192.168.5.0/24": true, "100.100.0.0/16": true, "fd12::/64": true,
		"198.19.77.0/25": false, "8.8.8.0/24": false, "169.254.169.0/24": false, "172.0.0.0/8": false, "10.0.0.0/7": false,
		"2001:db8::/64": false, "fe80::/64": false,
	} {
		if got := Private(netip.MustParsePrefix(s)); got != want {
			t.Errorf("Private(%s) = %v, want %v", s, got, want)
		}
	}
	if _, err := Parse("198.19.0.0/16", 27); err == nil || !strings.Contains(err.Error(), "private") {
		t.Errorf("a public pool: %v, want it refused", err)
	}

	table := []Route{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Table: 254},
		{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Dev: "eth0", Table: 254},
		{Prefix: netip.MustParsePrefix("198.19.77.0/24"), Dev: "dummy0", Table: 52},
		{Prefix: netip.MustParsePrefix("172.17.0.0/16"), Dev: "docker0", Table: 254},
		{Prefix: netip.MustParsePrefix("10.9.9.9/32"), Dev: "wg0", Table: 255, Local: true},
	}
	docker := func(dev string) bool { return dev == "docker0" }
	for s, want := range map[string]string{
		"198.19.77.0/25": "198.19.77.0/24 dev dummy0 table 52",
		"192.0.2.128/25": "192.0.2.0/24 dev eth0",
		"10.9.0.0/16":    "address 10.9.9.9 of dev wg0",
		"172.17.5.0/24":  "", // the engine's own bridge: the engine refuses the overlap itself
		"10.50.0.0/24":   "",
	} {
		got := Shadowed(netip.MustParsePrefix(s), table, docker)
		switch {
		case want == "" && len(got) > 0:
			t.Errorf("Shadowed(%s) = %v, want nothing", s, got)
		case want != "" && (len(got) != 1 || got[0].String() != want):
			t.Errorf("Shadowed(%s) = %v, want %s", s, got, want)
		}
	}
	if r, ok := DefaultRoute(netip.MustParsePrefix("8.8.8.0/24"), table); !ok || r.String() != "default via 192.0.2.1 dev eth0" {
		t.Errorf("DefaultRoute = %v %v", r, ok)
	}
	real, err := HostRouteTable()
	if err != nil {
		t.Fatal(err)
	}
	if got := Shadowed(netip.MustParsePrefix("127.0.0.0/24"), real, nil); len(got) == 0 {
		t.Errorf("the host's table %v has no loopback address", real)
	}
}
