// Package subnets is the address arithmetic behind managed subnets: pools of equal-sized IPv4
// subnets, the daemon's default pools, and the host's routes. It does no I/O with the engine;
// lifecycle allocates from a Pool with the daemon as the arbiter.
package subnets

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
)

// Subnets configures managed subnets. Every bridge network composebox creates for a sample
// gets an explicit small subnet from Pool, because the daemon's default address pools hold only
// about 31 networks on Engine 20.10. A network whose IPAM the project sets itself is left alone.
// The daemon arbitrates between processes: a subnet taken in the meantime is retried with the
// next one. The zero value is on, with 10.213.0.0/16 as /27s (2048 networks). It is the one
// type of this configuration: orchestrator.Subnets and lifecycle.Subnets are this type.
type Subnets struct {
	// Disabled leaves numbering to the daemon's default address pools.
	Disabled bool
	// Pool is where subnets come from (default 10.213.0.0/16). Keep it clear of the daemon's
	// default-address-pools; subnets that overlap the host's routes are skipped.
	Pool netip.Prefix
	// Bits is each subnet's prefix length (default 27: 30 addresses; at most 29).
	Bits int
	// Attempts bounds the tries per network when another process takes the chosen subnet
	// first (default 16).
	Attempts int
}

// Pool is a base prefix carved into subnets of Bits bits each.
type Pool struct {
	Base netip.Prefix
	Bits int
}

// Default is composebox's own pool: 2048 /27s (30 addresses each, ample for a sample's
// services). It sits inside 10/8 and outside Engine 20.10's defaults (172.17–31/16 and
// 192.168/16), so it never competes with networks the daemon numbers itself.
var Default = Pool{Base: netip.MustParsePrefix("10.213.0.0/16"), Bits: 27}

// DaemonDefaults are Engine 20.10's local-scope default address pools (libnetwork ipamutils):
// 31 networks in all, the wall every per-sample-network harness runs into.
var DaemonDefaults = []Pool{
	{netip.MustParsePrefix("172.17.0.0/16"), 16},
	{netip.MustParsePrefix("172.18.0.0/16"), 16},
	{netip.MustParsePrefix("172.19.0.0/16"), 16},
	{netip.MustParsePrefix("172.20.0.0/14"), 16},
	{netip.MustParsePrefix("172.24.0.0/14"), 16},
	{netip.MustParsePrefix("172.28.0.0/14"), 16},
	{netip.MustParsePrefix("192.168.0.0/16"), 20},
}

// Parse reads a pool from "10.213.0.0/16" and a subnet size in bits (0 means Default's).
func Parse(base string, bits int) (Pool, error) {
	pfx, err := netip.ParsePrefix(base)
	if err != nil {
		return Pool{}, fmt.Errorf("subnet pool %q: %w", base, err)
	}
	if bits == 0 {
		bits = Default.Bits
	}
	p := Pool{Base: pfx.Masked(), Bits: bits}
	return p, p.Validate()
}

// Configured is Default with base and bits in place of its own where they are set, validated.
func Configured(base netip.Prefix, bits int) (Pool, error) {
	p := Default
	if base.IsValid() {
		p.Base = base.Masked()
	}
	if bits != 0 {
		p.Bits = bits
	}
	return p, p.Validate()
}

// Validate reports a pool that cannot hold a usable subnet.
func (p Pool) Validate() error {
	switch {
	case !p.Base.IsValid() || !p.Base.Addr().Is4():
		return fmt.Errorf("subnet pool %s: must be an IPv4 prefix", p.Base)
	case p.Bits < p.Base.Bits():
		return fmt.Errorf("subnet pool %s: subnets of /%d do not fit in it", p.Base, p.Bits)
	case p.Bits > 29:
		return fmt.Errorf("subnet pool %s: /%d subnets are too small (at most /29: a gateway and a few containers)", p.Base, p.Bits)
	case !Private(p.Base):
		return fmt.Errorf("subnet pool %s: outside private address space (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10): "+
			"its networks would take addresses the host reaches through its default route", p.Base)
	case p.Bits-p.Base.Bits() > 24:
		return fmt.Errorf("subnet pool %s: more than 2^24 /%d subnets", p.Base, p.Bits)
	}
	return nil
}

// String is "10.213.0.0/16 as /27s".
func (p Pool) String() string { return fmt.Sprintf("%s as /%ds", p.Base, p.Bits) }

// Size is the number of subnets in the pool.
func (p Pool) Size() int { return 1 << (p.Bits - p.Base.Bits()) }

// Nth is the pool's i-th subnet, 0 ≤ i < Size.
func (p Pool) Nth(i int) netip.Prefix {
	a := p.Base.Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) + uint32(i)<<(32-p.Bits)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.PrefixFrom(netip.AddrFrom4(a), p.Bits)
}

// Split carves the pool into n pools of equal size (the smallest power of two at least n
// parts, the first n of them), with subnets of the same size: engines that share one host's
// routes, each numbering its own networks, then never pick the same subnet.
func (p Pool) Split(n int) ([]Pool, error) {
	if n <= 1 {
		return []Pool{p}, nil
	}
	bits := 0
	for 1<<bits < n {
		bits++
	}
	part := p.Base.Bits() + bits
	if part > p.Bits {
		return nil, fmt.Errorf("subnet pool %s: too small for %d engines' pools of /%d subnets (give each engine a subnet pool of its own)", p.Base, n, p.Bits)
	}
	whole := Pool{Base: p.Base, Bits: part}
	out := make([]Pool, n)
	for i := range out {
		out[i] = Pool{Base: whole.Nth(i), Bits: p.Bits}
	}
	return out, nil
}

// Free counts the pool's subnets that overlap none of used.
func (p Pool) Free(used []netip.Prefix) int {
	var inside []netip.Prefix
	for _, u := range used {
		if u.Overlaps(p.Base) {
			inside = append(inside, u)
		}
	}
	free := 0
	for i := range p.Size() {
		if !Overlaps(p.Nth(i), inside) {
			free++
		}
	}
	return free
}

// Overlaps reports whether s overlaps any of set.
func Overlaps(s netip.Prefix, set []netip.Prefix) bool {
	for _, u := range set {
		if s.Overlaps(u) {
			return true
		}
	}
	return false
}

// DaemonConfig is where a local daemon keeps default-address-pools.
const DaemonConfig = "/etc/docker/daemon.json"

// DaemonPools reads default-address-pools from a daemon.json, falling back to DaemonDefaults.
// The Engine API (1.41) does not report the pools, so this is best effort; source says which
// was used.
func DaemonPools(path string) (pools []Pool, source string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return DaemonDefaults, "engine defaults"
	}
	var cfg struct {
		Pools []struct {
			Base string `json:"base"`
			Size int    `json:"size"`
		} `json:"default-address-pools"`
	}
	if json.Unmarshal(b, &cfg) != nil || len(cfg.Pools) == 0 {
		return DaemonDefaults, "engine defaults"
	}
	for _, c := range cfg.Pools {
		pfx, err := netip.ParsePrefix(c.Base)
		if err != nil || c.Size < pfx.Bits() || c.Size > 32 || !pfx.Addr().Is4() {
			return DaemonDefaults, "engine defaults (" + path + " pools unreadable)"
		}
		pools = append(pools, Pool{pfx.Masked(), c.Size})
	}
	return pools, path
}
