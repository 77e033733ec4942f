package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// EgressGatewayService is the service composebox adds to a sample whose services have an
// egress allowlist: the sample's resolver and its only way out.
const EgressGatewayService = "composebox-egress"

// egressOutNetwork is the project's network the gateway reaches the outside through; nothing
// else joins it.
const egressOutNetwork = "composebox-egress-out"

// EgressGatewayRepository is the gateway image's repository; its tag is a hash of the binary.
const EgressGatewayRepository = "composebox/egress-gateway"

// EgressAllowFile is where the gateway reads the allowlist that SetEgress writes.
const EgressAllowFile = "/run/egress/allow"

// WithEgressBinary names the static composebox binary the egress gateway's image is built from
// (default: this process's executable, which must then be composebox built with CGO_ENABLED=0).
func WithEgressBinary(path string) Option { return func(e *Engine) { e.egressBinary = path } }

// egressServices are the services with an allowlist, sorted.
func egressServices(p *types.Project) []string {
	var out []string
	for _, name := range p.ServiceNames() {
		if _, ok := compose.EgressOf(p.Services[name]); ok && name != EgressGatewayService {
			out = append(out, name)
		}
	}
	return out
}

// prepareEgress, before any network exists, makes every network of a restricted service
// internal (no route out: the engine drops its forwarded traffic, IPv4 and IPv6, whatever the
// protocol) and adds the gateway's outbound network. It returns the restricted services.
func prepareEgress(p *types.Project) ([]string, error) {
	var restricted []string
	for _, name := range egressServices(p) {
		// A service on network_mode none reaches nothing already: it needs no gateway.
		if p.Services[name].NetworkMode != "none" {
			restricted = append(restricted, name)
		}
	}
	if len(restricted) == 0 {
		return nil, nil
	}
	for _, name := range restricted {
		s := p.Services[name]
		if s.NetworkMode != "" {
			return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("service %s: network_mode %s: an egress allowlist needs the service on the sample's networks", name, s.NetworkMode))
		}
		for key := range s.Networks {
			n := p.Networks[key]
			if bool(n.External) {
				return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("service %s: external network %s: an egress allowlist needs the service on the sample's own networks", name, key))
			}
			n.Internal = true
			p.Networks[key] = n
		}
	}
	var ours map[string]string
	for _, n := range p.Networks {
		ours = n.Labels
		break
	}
	p.Networks[egressOutNetwork] = types.NetworkConfig{Name: p.Name + "_" + egressOutNetwork, Labels: maps.Clone(ours)}
	return restricted, nil
}

// addEgressGateway, once the networks exist on their managed subnets, adds the gateway service
// on each restricted network at a fixed address (the subnet's last), and points each restricted
// service's DNS at it: the engine's resolver still answers the sample's own names and forwards
// every other to the gateway.
func (e *Engine) addEgressGateway(ctx context.Context, p *types.Project, restricted []string) error {
	ref, err := e.EgressImage(ctx)
	if err != nil {
		return err
	}
	addr := map[string]netip.Addr{}
	gwNets := map[string]*types.ServiceNetworkConfig{egressOutNetwork: nil}
	for _, name := range restricted {
		s := p.Services[name]
		var dns []string
		for _, key := range slices.Sorted(maps.Keys(s.Networks)) {
			a, ok := addr[key]
			if !ok {
				n := p.Networks[key]
				if len(n.Ipam.Config) == 0 {
					return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("network %s: an egress allowlist needs composebox's managed subnets (drop --no-managed-subnets and the network's own ipam)", key))
				}
				pfx, err := netip.ParsePrefix(n.Ipam.Config[0].Subnet)
				if err != nil || !pfx.Addr().Is4() || pfx.Bits() > 29 {
					return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("network %s: subnet %s: too small for the egress gateway", key, n.Ipam.Config[0].Subnet))
				}
				a = lastHost(pfx)
				addr[key] = a
				gwNets[key] = &types.ServiceNetworkConfig{Ipv4Address: a.String()}
			}
			dns = append(dns, a.String())
		}
		s.DNS = dns
		p.Services[name] = s
	}
	cmd := []string{"--allow-file", EgressAllowFile, "--upstream", egressResolver(p)}
	var ports []int
	for _, name := range restricted {
		specs, _ := compose.EgressOf(p.Services[name])
		cmd = append(cmd, "--service", name+"="+strings.Join(specs, ","))
		for _, sp := range specs {
			port := 0
			if _, ps, ok := strings.Cut(sp, ":"); ok {
				fmt.Sscan(ps, &port)
				ports = append(ports, port)
			} else {
				ports = append(ports, 80, 443)
			}
		}
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	if len(ports) == 0 {
		ports = []int{80, 443}
	}
	var ps []string
	for _, port := range ports {
		ps = append(ps, fmt.Sprint(port))
	}
	cmd = append(cmd, "--ports", strings.Join(ps, ","), "--project", p.Name)
	for _, c := range compose.EgressCeilingOf(p) {
		cmd = append(cmd, "--ceiling", c)
	}
	tmpl := p.Services[restricted[0]]
	custom := maps.Clone(tmpl.CustomLabels)
	custom[labels.ComposeServiceLabel] = EgressGatewayService
	init := true
	p.Services[EgressGatewayService] = types.ServiceConfig{
		Name:         EgressGatewayService,
		Image:        ref,
		Command:      cmd,
		Networks:     gwNets,
		Labels:       maps.Clone(tmpl.Labels),
		CustomLabels: custom,
		CapDrop:      []string{"ALL"},
		CapAdd:       []string{"NET_BIND_SERVICE"},
		SecurityOpt:  []string{"no-new-privileges:true"},
		Init:         &init,
		PidsLimit:    256,
		MemLimit:     types.UnitBytes(256 << 20),
		PullPolicy:   types.PullPolicyNever,
		Restart:      types.RestartPolicyUnlessStopped,
	}
	for _, name := range restricted {
		s := p.Services[name]
		if s.DependsOn == nil {
			s.DependsOn = types.DependsOnConfig{}
		}
		s.DependsOn[EgressGatewayService] = types.ServiceDependency{Condition: types.ServiceConditionStarted, Required: true}
		p.Services[name] = s
	}
	return nil
}

// egressResolver is the upstream of the project's gateway: the policy's, else the engine's own
// resolver inside the gateway's container, which forwards to the engine host's.
func egressResolver(p *types.Project) string {
	if r, ok := p.Extensions[compose.EgressResolverExtension].(string); ok && r != "" {
		return r
	}
	return "127.0.0.11:53"
}

func lastHost(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 2 // the broadcast address's predecessor
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// EgressImage builds the gateway's image FROM scratch around the composebox binary, unless it
// exists, and returns its reference.
func (e *Engine) EgressImage(ctx context.Context) (string, error) {
	path := e.egressBinary
	if path == "" {
		var err error
		if path, err = os.Executable(); err != nil {
			return "", fmt.Errorf("egress gateway image: %w", err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("egress gateway image: %w", err)
	}
	body, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return "", fmt.Errorf("egress gateway image: %w", err)
	}
	h := sha256.Sum256(body)
	spec := imagespec.Spec{
		Repository: EgressGatewayRepository,
		Dockerfile: "FROM scratch\nCOPY . /\nENTRYPOINT [\"/composebox\", \"__egress-gateway\"]\n",
		Files: []imagespec.File{
			{Name: "composebox", Mode: 0o755, Body: body},
			{Name: "run", Mode: 0o755, Dir: true},
			{Name: "run/egress", Mode: 0o777, Dir: true},
			{Name: "etc", Mode: 0o755, Dir: true},
			{Name: "etc/egress-binary", Mode: 0o644, Body: []byte(hex.EncodeToString(h[:]) + "\n")},
		},
		Labels: map[string]string{labels.LabelManaged: "true", labels.LabelTask: "", labels.LabelImage: "egress-gateway"},
	}
	ref, _, err := e.images.Ensure(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("egress gateway image: %w", err)
	}
	return ref, nil
}
