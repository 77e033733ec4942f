package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/internal/subnets"
)

// hostRoutesOptIn is the flag that lets a project's addresses shadow the host's.
const hostRoutesOptIn = "--allow host-routes"

// checkHostRoutes refuses, before any network exists, the addresses a project sets itself that
// would shadow the host's: a subnet, IP range, gateway or auxiliary address of a network's
// ipam.config, or a container's fixed ipv4_address or ipv6_address, that overlaps one of the
// host's routes (every routing table) or addresses, or lies outside private address space,
// where the host reaches it through its default route. The engine puts a route to each network
// on the host, so for as long as the sample lived the host would send that traffic to the
// sample. Routes on the engine's own bridges are left out: the engine refuses overlapping
// networks itself. The host is this one: a remote engine's routes cannot be read, and it is
// not checked.
func (e *Engine) checkHostRoutes(ctx context.Context, p *types.Project) error {
	type claim struct {
		service, field, value string
		prefix                netip.Prefix
	}
	var claims []claim
	add := func(service, field, value string, single bool) {
		var pfx netip.Prefix
		var err error
		if single {
			var a netip.Addr
			if a, err = netip.ParseAddr(value); err == nil {
				pfx = netip.PrefixFrom(a, a.BitLen())
			}
		} else {
			pfx, err = netip.ParsePrefix(value)
		}
		if err == nil {
			claims = append(claims, claim{service, field, value, pfx.Masked()})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(p.Networks)) {
		n := p.Networks[key]
		if bool(n.External) {
			continue
		}
		for i, c := range n.Ipam.Config {
			if c == nil {
				continue
			}
			at := fmt.Sprintf("networks.%s.ipam.config[%d].", key, i)
			add("", at+"subnet", c.Subnet, false)
			add("", at+"ip_range", c.IPRange, false)
			add("", at+"gateway", c.Gateway, true)
			for _, name := range slices.Sorted(maps.Keys(c.AuxiliaryAddresses)) {
				add("", at+"aux_addresses."+name, c.AuxiliaryAddresses[name], true)
			}
		}
	}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		for _, key := range slices.Sorted(maps.Keys(s.Networks)) {
			if sn := s.Networks[key]; sn != nil {
				add(name, "networks."+key+".ipv4_address", sn.Ipv4Address, true)
				add(name, "networks."+key+".ipv6_address", sn.Ipv6Address, true)
			}
		}
	}
	if len(claims) == 0 || !strings.HasPrefix(e.api.DaemonHost(), "unix://") {
		return nil
	}
	table, err := subnets.HostRouteTable()
	if err != nil {
		return fmt.Errorf("check the project's addresses against the host's routes: %w", err)
	}
	engineBridges, err := e.engineBridges(ctx)
	if err != nil {
		return err
	}
	var vs []compose.Violation
	for _, c := range claims {
		v := compose.Violation{Service: c.service, Field: c.field, Value: c.value, Rule: "host-routes", OptIn: hostRoutesOptIn}
		if hit := subnets.Shadowed(c.prefix, table, func(dev string) bool { return engineBridges[dev] }); len(hit) > 0 {
			names := make([]string, 0, 3)
			for _, r := range hit[:min(3, len(hit))] {
				if r.Local {
					names = append(names, r.String())
				} else {
					names = append(names, "route "+r.String())
				}
			}
			if len(hit) > 3 {
				names = append(names, fmt.Sprintf("%d more", len(hit)-3))
			}
			v.Why = "overlaps the host's " + strings.Join(names, ", ") + ": while the sample lives, the host would send that traffic to the sample"
		} else if !subnets.Private(c.prefix) {
			via := "its default route"
			if r, ok := subnets.DefaultRoute(c.prefix, table); ok {
				via += " (" + r.String() + ")"
			}
			v.Why = "outside private address space, which the host reaches through " + via +
				": while the sample lives, the host would send that traffic to the sample"
		} else {
			continue
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil
	}
	return &compose.PolicyError{Op: "check the addresses of project " + p.Name + " against the host's routes", Violations: vs}
}

// engineBridges are the host interfaces of the engine's bridge networks.
func (e *Engine) engineBridges(ctx context.Context) (map[string]bool, error) {
	nets, err := e.api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := map[string]bool{}
	for _, n := range nets {
		if n.Driver == "bridge" {
			out[hostfw.BridgeName(n.ID, n.Options)] = true
		}
	}
	return out, nil
}
