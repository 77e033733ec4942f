package subnets

import (
	"net/netip"
	"testing"
)

func TestSplit(t *testing.T) {
	p := Pool{Base: netip.MustParsePrefix("10.213.0.0/16"), Bits: 27}
	parts, err := p.Split(3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.213.0.0/18", "10.213.64.0/18", "10.213.128.0/18"}
	if len(parts) != len(want) {
		t.Fatalf("%d parts, want %d", len(parts), len(want))
	}
	for i, q := range parts {
		if q.Base.String() != want[i] || q.Bits != 27 {
			t.Errorf("part %d = %s, want %s as /27s", i, q, want[i])
		}
		if err := q.Validate(); err != nil {
			t.Errorf("part %d: %v", i, err)
		}
	}
	if one, err := p.Split(1); err != nil || one[0] != p {
		t.Errorf("split in 1 = %v, %v; want the pool itself", one, err)
	}
	if _, err := (Pool{Base: netip.MustParsePrefix("10.213.0.0/26"), Bits: 27}).Split(3); err == nil {
		t.Error("a /26 of /27s split in 3: no error")
	}
}
