package compose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// AdaptationKind names what Normalize changed so that samples of one project can run side by
// side.
type AdaptationKind string

const (
	// AdaptContainerName: container_name dropped; its value became a network alias.
	AdaptContainerName AdaptationKind = "container_name"
	// AdaptHostPort: a fixed published host port became an ephemeral one.
	AdaptHostPort AdaptationKind = "host_port"
	// AdaptExternalNetwork: an external network became a network of the sample's own.
	AdaptExternalNetwork AdaptationKind = "external_network"
	// AdaptFixedName: a fixed name: of a network or volume was prefixed with the project name.
	AdaptFixedName AdaptationKind = "fixed_name"
	// AdaptProjectName: ${COMPOSE_PROJECT_NAME} was the sample's project name.
	AdaptProjectName AdaptationKind = "project_name"
	// AdaptBridgeNetwork: network_mode bridge (or default) became the sample's own bridge
	// network, the project's default one, instead of the engine's shared default bridge.
	AdaptBridgeNetwork AdaptationKind = "bridge_network"
)

// EngineBridgeExtension, set to true on a service with network_mode bridge, asks for the
// engine's shared default bridge (docker0) itself, as docker compose gives it: the network every
// container of the host is on, which the host firewall does not cover, so the policy's
// host-access opt-in must allow it. Without it, network_mode bridge runs on a bridge network of
// the sample's own, with links and names working as they do on the engine's.
const EngineBridgeExtension = "x-composebox-engine-bridge"

// bridgeMode reports network_mode bridge or default, both of which name the engine's default
// bridge on Linux.
func bridgeMode(mode string) bool {
	m := strings.ToLower(strings.TrimSpace(mode))
	return m == "bridge" || m == "default"
}

// wantsEngineBridge reports a service that sets EngineBridgeExtension to true.
func wantsEngineBridge(s types.ServiceConfig) bool {
	switch v := s.Extensions[EngineBridgeExtension].(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(strings.TrimSpace(v), "true")
	}
	return false
}

// Adaptation is one change Normalize made to a sample's project, where the file as written
// would have made parallel samples collide or share.
type Adaptation struct {
	Kind AdaptationKind `json:"kind"`
	// Service is the service changed, if any.
	Service string `json:"service,omitempty"`
	// Resource is the network or volume key changed, if any.
	Resource string `json:"resource,omitempty"`
	// From and To are the value as written and as the sample gets it.
	From string `json:"from"`
	To   string `json:"to"`
	// Message says it in one sentence.
	Message string `json:"message"`
}

func (a Adaptation) String() string { return a.Message }

// ephemeralHostIP is where a port that names no address is published: the port is for the
// harness on this host, not for the network.
const ephemeralHostIP = "127.0.0.1"

// loopbackPorts publishes every port that names no host address on ephemeralHostIP, where the
// engine would otherwise bind 0.0.0.0 and ::, which other hosts and every container that can
// reach the host (other samples included) could dial. The policy's public-ports opt-in is what
// lets a file name another address.
func loopbackPorts(ports []types.ServicePortConfig) []types.ServicePortConfig {
	var out []types.ServicePortConfig
	for i, port := range ports {
		if port.HostIP != "" {
			continue
		}
		if out == nil {
			out = slices.Clone(ports)
		}
		out[i].HostIP = ephemeralHostIP
	}
	if out == nil {
		return ports
	}
	return out
}

// adapt makes p, a sample's copy, safe to run beside other samples of the same project, and
// reports each change. It runs after the resources are renamed for the sample (renameResources),
// so that only the names the file fixed are left to prefix.
func adapt(p *types.Project, report func(Adaptation)) {
	for _, name := range p.ServiceNames() {
		if s := p.Services[name]; bridgeMode(s.NetworkMode) && !wantsEngineBridge(s) {
			ownBridge(p, name, report)
		}
	}
	for _, key := range sortedKeys(p.Networks) {
		n := p.Networks[key]
		switch {
		case bool(n.External):
			was := n.Name
			if was == "" {
				was = key
			}
			n.External, n.Name = false, p.Name+"_"+key
			p.Networks[key] = n
			what := key
			if was != key {
				what = fmt.Sprintf("%s (%q)", key, was)
			}
			report(Adaptation{Kind: AdaptExternalNetwork, Resource: key, From: was, To: n.Name,
				Message: fmt.Sprintf("external network %s replaced by the sample's own network %q, with the same aliases", what, n.Name)})
		case fixedName(p.Name, key, n.Name):
			to := p.Name + "_" + n.Name
			report(Adaptation{Kind: AdaptFixedName, Resource: key, From: n.Name, To: to,
				Message: fmt.Sprintf("network %s: fixed name %q prefixed with the project name: %q", key, n.Name, to)})
			n.Name = to
			p.Networks[key] = n
		}
	}
	for _, key := range sortedKeys(p.Volumes) {
		v := p.Volumes[key]
		if !bool(v.External) && fixedName(p.Name, key, v.Name) {
			to := p.Name + "_" + v.Name
			report(Adaptation{Kind: AdaptFixedName, Resource: key, From: v.Name, To: to,
				Message: fmt.Sprintf("volume %s: fixed name %q prefixed with the project name: %q", key, v.Name, to)})
			v.Name = to
			p.Volumes[key] = v
		}
	}
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.ContainerName != "" {
			adaptContainerName(p, name, report)
			s = p.Services[name]
		}
		for i, port := range s.Ports {
			if port.Published == "" {
				continue
			}
			ip := port.HostIP
			if ip == "" {
				ip = ephemeralHostIP
			}
			proto := port.Protocol
			if proto == "" {
				proto = "tcp"
			}
			from := port.Published
			if port.HostIP != "" {
				from = port.HostIP + ":" + from
			}
			ports := slices.Clone(s.Ports)
			ports[i].Published, ports[i].HostIP = "", ip
			s.Ports = ports
			report(Adaptation{Kind: AdaptHostPort, Service: name, From: from, To: ip + ":0",
				Message: fmt.Sprintf("service %q: host port %s of container port %d/%s published on an ephemeral port of %s instead",
					name, from, port.Target, proto, ip)})
		}
		s.Ports = loopbackPorts(s.Ports)
		p.Services[name] = s
	}
}

// ownBridge moves a service on network_mode bridge to the project's default network, a bridge
// that composebox creates for the sample, firewalls off the host and removes with it, instead of
// the engine's default bridge, which every container on the host shares. links work there too
// (compose sets them on the network), and the other services reach it by name as they would
// through links.
func ownBridge(p *types.Project, name string, report func(Adaptation)) {
	s := p.Services[name]
	was := s.NetworkMode
	s.NetworkMode = ""
	s.Networks = map[string]*types.ServiceNetworkConfig{"default": nil}
	p.Services[name] = s
	if _, ok := p.Networks["default"]; !ok {
		if p.Networks == nil {
			p.Networks = types.Networks{}
		}
		p.Networks["default"] = types.NetworkConfig{Name: p.Name + "_default"}
	}
	report(Adaptation{Kind: AdaptBridgeNetwork, Service: name, From: was, To: p.Networks["default"].Name,
		Message: fmt.Sprintf("service %q: network_mode %s runs on the sample's own bridge network %q, not the engine's shared one (links kept)",
			name, was, p.Networks["default"].Name)})
}

// fixedName reports a network or volume name the file fixed, rather than one derived from the
// project name (<project>_<key>, or any name starting with the project's, which a file can only
// have written through ${COMPOSE_PROJECT_NAME}).
func fixedName(project, key, name string) bool {
	return name != "" && name != project+"_"+key && !strings.HasPrefix(name, project)
}

// adaptContainerName drops a service's container_name and makes its value an alias on each of
// the service's networks, so that it still resolves, within the sample only. A service on
// network_mode service:X shares X's network stack, so the alias goes on X's networks; one on
// network_mode none, host or container:... has no network of the project to carry it, and
// nothing on a project network could reach it by that name before either.
func adaptContainerName(p *types.Project, name string, report func(Adaptation)) {
	s := p.Services[name]
	cn := s.ContainerName
	s.ContainerName = ""
	p.Services[name] = s
	holder := name
	if target, ok := strings.CutPrefix(s.NetworkMode, types.NetworkModeServicePrefix); ok {
		holder = target
	}
	h, ok := p.Services[holder]
	if !ok || (h.NetworkMode != "" && len(h.Networks) == 0) {
		report(Adaptation{Kind: AdaptContainerName, Service: name, From: cn,
			Message: fmt.Sprintf("service %q: container_name %q dropped; with network_mode %s there is no network to carry it as an alias",
				name, cn, s.NetworkMode)})
		return
	}
	nets := make(map[string]*types.ServiceNetworkConfig, len(h.Networks))
	for _, key := range sortedKeys(h.Networks) {
		c := types.ServiceNetworkConfig{}
		if old := h.Networks[key]; old != nil {
			c = *old
		}
		if !slices.Contains(c.Aliases, cn) {
			c.Aliases = append(slices.Clone(c.Aliases), cn)
		}
		nets[key] = &c
	}
	h.Networks = nets
	p.Services[holder] = h
	noun := "network"
	if len(nets) > 1 {
		noun = "networks"
	}
	msg := fmt.Sprintf("service %q: container_name %q dropped; it is a network alias on %s %s instead",
		name, cn, noun, strings.Join(sortedKeys(nets), ", "))
	if holder != name {
		msg = fmt.Sprintf("service %q: container_name %q dropped; it is a network alias on service %q's networks (%s) instead, "+
			"whose network stack it shares", name, cn, holder, strings.Join(sortedKeys(nets), ", "))
	}
	report(Adaptation{Kind: AdaptContainerName, Service: name, From: cn, To: cn, Message: msg})
}
