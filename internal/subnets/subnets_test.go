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
