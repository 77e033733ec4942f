package subnets

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Route is one route of the host's routing tables, or one of the host's own addresses.
type Route struct {
	// Prefix is where the route leads (0.0.0.0/0 or ::/0 for a default route), or the
	// address itself (as a /32 or /128, or a local range such as 127.0.0.0/8) for Local.
	Prefix netip.Prefix
	// Dev is the interface the route goes out of, or the address is on.
	Dev string
	// Gateway is the next hop, when the route has one.
	Gateway netip.Addr
	// Table is the routing table (254 is main, 255 local).
	Table int
	// Local says Prefix is an address of the host (the kernel's local routes).
	Local bool
}

const (
	tableMain  = 254
	tableLocal = 255
)

// Default reports a default route.
func (r Route) Default() bool { return !r.Local && r.Prefix.Bits() == 0 }

// String reads like `ip route`: "198.19.77.0/24 dev dummy0", "default via 192.0.2.1 dev eth0",
// "address 192.0.2.2 of dev eth0".
func (r Route) String() string {
	if r.Local {
		what := r.Prefix.String()
		if r.Prefix.IsSingleIP() {
			what = r.Prefix.Addr().String()
		}
		return "address " + what + " of dev " + r.Dev
	}
	var b strings.Builder
	if r.Default() {
		b.WriteString("default")
	} else {
		b.WriteString(r.Prefix.String())
	}
	if r.Gateway.IsValid() {
		b.WriteString(" via " + r.Gateway.String())
	}
	if r.Dev != "" {
		b.WriteString(" dev " + r.Dev)
	}
	if r.Table != tableMain && r.Table != 0 {
		fmt.Fprintf(&b, " table %d", r.Table)
	}
	return b.String()
}

// HostRouteTable lists the host's IPv4 and IPv6 unicast routes in every routing table (policy
// routing's tables too, such as a VPN's), default routes included, and the host's own
// addresses, as the kernel reports them over netlink. Link-local IPv6 routes (fe80::/64 on
// every interface) are left out.
func HostRouteTable() ([]Route, error) {
	raw, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(raw)
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	names := map[int]string{}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			names[i.Index] = i.Name
		}
	}
	var out []Route
	for i := range msgs {
		if r, ok := parseRouteMessage(&msgs[i], names); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// linkLocal6 is IPv6 link-local space: every interface has a route to it, and no network
// created for a sample takes addresses there.
var linkLocal6 = netip.MustParsePrefix("fe80::/10")

// parseRouteMessage reads one RTM_NEWROUTE message: a unicast route or a local address.
func parseRouteMessage(m *syscall.NetlinkMessage, names map[int]string) (Route, bool) {
	if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
		return Route{}, false
	}
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
	family, dstLen, table, typ := m.Data[0], int(m.Data[1]), int(m.Data[4]), m.Data[7]
	if typ != syscall.RTN_UNICAST && typ != syscall.RTN_LOCAL {
		return Route{}, false // broadcast, multicast, blackhole, unreachable...
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return Route{}, false
	}
	r := Route{Table: table, Local: typ == syscall.RTN_LOCAL}
	var dst netip.Addr
	switch family {
	case syscall.AF_INET:
		dst = netip.IPv4Unspecified()
	case syscall.AF_INET6:
		dst = netip.IPv6Unspecified()
	default:
		return Route{}, false
	}
	for _, a := range attrs {
		switch a.Attr.Type {
		case syscall.RTA_DST:
			if ad, ok := netip.AddrFromSlice(a.Value); ok {
				dst = ad
			}
		case syscall.RTA_GATEWAY:
			if gw, ok := netip.AddrFromSlice(a.Value); ok {
				r.Gateway = gw
			}
		case syscall.RTA_OIF:
			if len(a.Value) >= 4 {
				r.Dev = names[int(binary.NativeEndian.Uint32(a.Value))]
			}
		case syscall.RTA_TABLE:
			if len(a.Value) >= 4 {
				r.Table = int(binary.NativeEndian.Uint32(a.Value))
			}
		}
	}
	pfx, err := dst.Prefix(dstLen)
	if err != nil {
		return Route{}, false
	}
	r.Prefix = pfx
	if pfx.Addr().Is6() && linkLocal6.Overlaps(pfx) && pfx.Bits() > 0 {
		return Route{}, false
	}
	return r, true
}

// HostRoutes lists the host's IPv4 routes other than default routes, and its IPv4 addresses, in
// every routing table (HostRouteTable); where netlink cannot be read, the main table's routes
// from /proc/net/route. A managed subnet that overlaps one would shadow a network the host
// already reaches.
func HostRoutes() ([]netip.Prefix, error) {
	table, err := HostRouteTable()
	if err != nil {
		return procRoutes()
	}
	var out []netip.Prefix
	for _, r := range table {
		if r.Prefix.Addr().Is4() && !r.Default() {
			out = append(out, r.Prefix)
		}
	}
	return out, nil
}

func procRoutes() ([]netip.Prefix, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseRoutes(f)
}

func parseRoutes(r io.Reader) ([]netip.Prefix, error) {
	var out []netip.Prefix
	sc := bufio.NewScanner(r)
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(f[1], 16, 32)
		mask, err2 := strconv.ParseUint(f[7], 16, 32)
		if err1 != nil || err2 != nil || mask == 0 {
			continue // unparsable, or the default route
		}
		// The kernel prints both in host byte order, which is little-endian on every platform
		// composebox runs on.
		var a, m [4]byte
		binary.LittleEndian.PutUint32(a[:], uint32(dst))
		binary.LittleEndian.PutUint32(m[:], uint32(mask))
		bits := 0
		for _, b := range m {
			for ; b&0x80 != 0; b <<= 1 {
				bits++
			}
		}
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked())
	}
	return out, sc.Err()
}

// privateSpace is address space no host reaches through the internet: RFC 1918, shared
// (carrier-grade NAT) space and IPv6 unique local addresses.
var privateSpace = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// Private reports whether s lies wholly in private address space (10/8, 172.16/12,
// 192.168/16, 100.64/10, fc00::/7). A network elsewhere takes addresses the host reaches
// through its default route: a public service, the cloud's metadata address (169.254.169.254).
func Private(s netip.Prefix) bool {
	s = netip.PrefixFrom(s.Addr().Unmap(), s.Bits())
	for _, p := range privateSpace {
		if p.Bits() <= s.Bits() && p.Contains(s.Addr()) {
			return true
		}
	}
	return false
}

// Shadowed lists what a network on s would take from the host: every route of table other
// than a default route that overlaps s, and every host address inside it. Routes and
// addresses on the devices skip says to leave out (the engine's own bridges) are not listed.
func Shadowed(s netip.Prefix, table []Route, skip func(dev string) bool) []Route {
	var out []Route
	for _, r := range table {
		if r.Default() || (skip != nil && skip(r.Dev)) {
			continue
		}
		if r.Prefix.Overlaps(s) {
			out = append(out, r)
		}
	}
	return out
}

// DefaultRoute is the first default route of table for s's family, if any.
func DefaultRoute(s netip.Prefix, table []Route) (Route, bool) {
	for _, r := range table {
		if r.Default() && r.Prefix.Addr().Is4() == s.Addr().Is4() && (r.Table == tableMain || r.Table == 0) {
			return r, true
		}
	}
	for _, r := range table {
		if r.Default() && r.Prefix.Addr().Is4() == s.Addr().Is4() {
			return r, true
		}
	}
	return Route{}, false
}
