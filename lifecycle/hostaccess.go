package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	"github.com/composebox/composebox/cleanup/labels"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/hostfw"
)

// ErrHostFirewall marks a host where samples' networks cannot be kept off the host's own
// addresses (not root, no nftables). It is an ErrPrerequisite; the opt-out is the policy's
// host-access.
var ErrHostFirewall = hostfw.ErrUnavailable

// BuildNetwork is the network builds run on unless the task opts in to host access: a bridge of
// composebox's own, with the host firewall's rule and without inter-container traffic, so that
// a build's RUN steps reach the outside as on the default bridge, but neither the host's
// services nor other builds.
const BuildNetwork = "composebox-build"

// hostFirewallError explains a firewall that cannot be applied, and names the opt-out.
func hostFirewallError(what string, err error) error {
	if !errors.Is(err, hostfw.ErrUnavailable) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return cbxerr.Wrap(ErrHostFirewall, err, what+": cannot keep its containers off the host's own addresses "+
		"(run composebox as root on a kernel with nftables, or opt out with --allow host-access)")
}

// protectNetworks puts the host firewall's rule on every bridge network of the project. It runs
// after the networks exist and before any container starts. created are the networks Up made
// itself: when they are all of the project's own, nobody else made any and no listing is needed.
func (e *Engine) protectNetworks(ctx context.Context, p *types.Project, created []namedNetwork) error {
	nets := created
	if !allCreated(p, created) {
		list, err := e.api.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.ComposeProjectLabel+"="+p.Name))})
		if err != nil {
			return fmt.Errorf("list networks: %w", err)
		}
		nets = nets[:0:0]
		for _, n := range list {
			if n.Driver != "bridge" {
				continue // macvlan and others (an opt-in) never deliver to the host through a bridge
			}
			nets = append(nets, namedNetwork{n.Name, hostfw.Network{ID: n.ID, Bridge: hostfw.BridgeName(n.ID, n.Options)}})
		}
	}
	for _, n := range nets {
		if err := e.fw.Protect(n.Network); err != nil {
			return hostFirewallError("network "+n.name, err)
		}
		e.log.Debug("host firewall", "network", n.name, "bridge", n.Bridge)
	}
	return nil
}

// namedNetwork is a bridge network to protect, with its name for messages.
type namedNetwork struct {
	name string
	hostfw.Network
}

// allCreated reports whether created holds every network of p that is the project's own (not
// external): createNetworks makes only bridge networks, so these are all there is to protect.
func allCreated(p *types.Project, created []namedNetwork) bool {
	own := 0
	for _, n := range p.Networks {
		if !bool(n.External) {
			own++
		}
	}
	return own == len(created)
}

// buildNetwork makes sure BuildNetwork exists, is composebox's and has its firewall rule, and
// returns its name. A network of that name that composebox did not create is refused: builds
// would join it.
func (e *Engine) buildNetwork(ctx context.Context) (string, error) {
	for range 3 {
		n, err := e.api.NetworkInspect(ctx, BuildNetwork, network.InspectOptions{})
		switch {
		case err == nil:
			if n.Labels[labels.LabelBuildNetwork] != "true" || n.Driver != "bridge" {
				return "", cbxerr.New(cbxerr.ErrConflict, fmt.Sprintf("build network %s exists but composebox did not create it: remove it", BuildNetwork))
			}
			if err := e.fw.Protect(hostfw.Network{ID: n.ID, Bridge: hostfw.BridgeName(n.ID, n.Options)}); err != nil {
				return "", hostFirewallError("build network "+BuildNetwork, err)
			}
			return BuildNetwork, nil
		case !errdefs.IsNotFound(err):
			return "", fmt.Errorf("inspect build network %s: %w", BuildNetwork, err)
		}
		if err := e.createBuildNetwork(ctx); err != nil {
			return "", err
		}
	}
	return "", cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("build network %s: created, then gone, three times", BuildNetwork))
}

// createBuildNetwork creates BuildNetwork, on a managed subnet when those are on. Losing the
// race to another process is fine: its network is the same.
func (e *Engine) createBuildNetwork(ctx context.Context) error {
	opts := network.CreateOptions{
		Driver:  "bridge",
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
		Labels:  map[string]string{labels.LabelBuildNetwork: "true", labels.LabelCreated: time.Now().UTC().Format(time.RFC3339)},
	}
	managed := !e.subnets.Disabled
	var taken error
	for range 8 {
		if managed {
			existing, err := e.usedSubnets(ctx)
			if err != nil {
				return err
			}
			s, ok := e.alloc.pick(e.pool, existing, time.Now())
			if !ok {
				return cbxerr.Wrap(ErrAddressPool, taken, "create build network "+BuildNetwork+": composebox's subnet pool is full")
			}
			opts.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: s.String()}}}
		}
		_, err := e.api.NetworkCreate(ctx, BuildNetwork, opts)
		switch {
		case err == nil || errdefs.IsConflict(err) || strings.Contains(err.Error(), "already exists"):
			return nil
		case managed && isOverlap(err):
			taken = err
		default:
			return fmt.Errorf("create build network %s: %w", BuildNetwork, err)
		}
	}
	return cbxerr.Wrap(ErrAddressPool, taken, "create build network "+BuildNetwork+": every subnet tried was taken")
}
