package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/errdefs"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/internal/subnets"
)

// Subnets configures managed subnets (subnets.Subnets, the one home of this configuration).
type Subnets = subnets.Subnets

// WithSubnets configures managed subnets (default: on, 10.213.0.0/16 as /27s). New rejects an
// invalid pool.
func WithSubnets(s Subnets) Option { return func(e *Engine) { e.subnets = s } }

// ErrAddressPool marks a network that could not be numbered: the daemon's default pools, or
// composebox's own pool, are full. It is an ErrUnavailable.
var ErrAddressPool = cbxerr.New(cbxerr.ErrUnavailable, "address pool exhausted")

// allocator hands out managed subnets. The daemon is the arbiter between processes: a subnet
// another process took first makes the create fail with an overlap, and the next candidate is
// tried. Within the process, reservations keep concurrent samples off each other's subnets
// until the daemon lists them.
type allocator struct {
	mu     sync.Mutex
	cursor int
	// recent holds subnets chosen by this process, until a NetworkList started after their
	// creation can be trusted to show them.
	recent map[netip.Prefix]time.Time
}

// recentTTL outlives any NetworkList that may have started before a network's creation.
const recentTTL = 30 * time.Second

func (a *allocator) pick(pool subnets.Pool, used []netip.Prefix, now time.Time) (netip.Prefix, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recent == nil {
		a.recent = map[netip.Prefix]time.Time{}
		// Processes start at different points of the pool, so that they rarely contend.
		a.cursor = rand.IntN(pool.Size())
	}
	for s, t := range a.recent {
		if now.Sub(t) > recentTTL {
			delete(a.recent, s)
		}
	}
	size := pool.Size()
	for i := range size {
		idx := (a.cursor + i) % size
		s := pool.Nth(idx)
		if _, taken := a.recent[s]; taken || subnets.Overlaps(s, used) {
			continue
		}
		a.cursor = (idx + 1) % size
		a.recent[s] = now
		return s, true
	}
	return netip.Prefix{}, false
}

// managedNetwork reports whether composebox numbers n: a bridge network of the project's own,
// with no IPAM of the user's.
func managedNetwork(n types.NetworkConfig) bool {
	return !bool(n.External) && (n.Driver == "" || n.Driver == "bridge") &&
		n.Ipam.Driver == "" && len(n.Ipam.Config) == 0
}

// createNetworks creates the project's managed networks with explicit subnets, labelled as
// compose labels its own, so that compose's create finds and uses them. Networks with the
// user's own IPAM, other drivers and external ones are left to compose. It returns the
// networks it created, for the host firewall.
func (e *Engine) createNetworks(ctx context.Context, p *types.Project) ([]namedNetwork, error) {
	if e.subnets.Disabled {
		return nil, nil
	}
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(p.Networks)) {
		if managedNetwork(p.Networks[k]) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	used, err := e.usedSubnets(ctx)
	if err != nil {
		return nil, err
	}
	var created []namedNetwork
	for _, k := range keys {
		var n namedNetwork
		if used, n, err = e.createNetwork(ctx, p, k, used); err != nil {
			return created, err
		}
		if n.ID != "" {
			created = append(created, n)
		}
	}
	return created, nil
}

// createNetwork creates the network of p under key on a free managed subnet, and returns it
// (its zero value when the network already existed: left by an interrupted attempt).
func (e *Engine) createNetwork(ctx context.Context, p *types.Project, key string, used []netip.Prefix) ([]netip.Prefix, namedNetwork, error) {
	n := p.Networks[key]
	pool := e.pool
	attempts := e.subnets.Attempts
	if attempts <= 0 {
		attempts = 16
	}
	labels := map[string]string{}
	maps.Copy(labels, n.Labels)
	maps.Copy(labels, n.CustomLabels)
	labels[api.NetworkLabel] = key
	labels[api.ProjectLabel] = p.Name
	labels[api.VersionLabel] = api.ComposeVersion
	var last error
	for range attempts {
		s, ok := e.alloc.pick(pool, used, time.Now())
		if !ok {
			return used, namedNetwork{}, cbxerr.Wrap(ErrAddressPool, last, fmt.Sprintf(
				"create network %s: composebox's subnet pool %s is full (%d subnets, all in use or overlapping the host's routes): "+
					"give a larger pool (backends.Config.Subnets, --subnet-pool) or remove stale samples (`composebox cleanup --stale`)",
				n.Name, pool, pool.Size()))
		}
		resp, err := e.api.NetworkCreate(ctx, n.Name, network.CreateOptions{
			Driver:     n.Driver,
			Options:    n.DriverOpts,
			Internal:   n.Internal,
			Attachable: n.Attachable,
			EnableIPv6: n.EnableIPv6,
			IPAM:       &network.IPAM{Config: []network.IPAMConfig{{Subnet: s.String()}}},
			Labels:     labels,
		})
		switch {
		case err == nil:
			n.Ipam.Config = []*types.IPAMPool{{Subnet: s.String()}}
			p.Networks[key] = n
			e.log.Debug("managed subnet", "network", n.Name, "subnet", s)
			return append(used, s), namedNetwork{n.Name, hostfw.Network{ID: resp.ID, Bridge: hostfw.BridgeName(resp.ID, n.DriverOpts)}}, nil
		case isOverlap(err):
			// Another process (or a network made outside composebox) got there first: the
			// daemon's list now shows what else is taken.
			e.log.Debug("managed subnet taken, trying another", "network", n.Name, "subnet", s)
			last = err
			used = append(used, s)
			if fresh, lerr := e.usedSubnets(ctx); lerr == nil {
				used = append(fresh, used...)
			}
		case errdefs.IsConflict(err) || strings.Contains(err.Error(), "already exists"):
			// Left by an interrupted attempt of this same sample: compose uses it as it is.
			return used, namedNetwork{}, nil
		default:
			return used, namedNetwork{}, fmt.Errorf("create network %s (subnet %s): %w", n.Name, s, err)
		}
	}
	return used, namedNetwork{}, cbxerr.Wrap(ErrAddressPool, last, fmt.Sprintf(
		"create network %s: %d subnets of %s in a row were taken by other networks as composebox chose them", n.Name, attempts, pool))
}

// usedSubnets is every IPv4 subnet the daemon's networks hold, plus the host's routes.
func (e *Engine) usedSubnets(ctx context.Context) ([]netip.Prefix, error) {
	nets, err := e.api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	var used []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if s, err := netip.ParsePrefix(c.Subnet); err == nil && s.Addr().Is4() {
				used = append(used, s.Masked())
			}
		}
	}
	if routes, err := subnets.HostRoutes(); err == nil {
		used = append(used, routes...)
	}
	return used, nil
}

// isOverlap matches libnetwork's refusal of a subnet that another network holds.
func isOverlap(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "overlaps with other one") || strings.Contains(msg, "Pool overlaps")
}

// poolExhausted matches the daemon running out of its default address pools (Engine 20.10
// says the first, later engines the second).
func poolExhausted(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "non-overlapping IPv4 address pool") ||
		strings.Contains(msg, "fully subnetted")
}

// addressPoolError explains a daemon out of default address pools.
func addressPoolError(project string, err error) error {
	return cbxerr.Wrap(ErrAddressPool, err, fmt.Sprintf(
		"up project %s: the daemon's default address pools are exhausted (Engine 20.10's hold about 31 bridge networks): "+
			"turn composebox's managed subnets back on (backends.Config.Subnets, --subnet-pool), or set "+
			"default-address-pools in /etc/docker/daemon.json and restart dockerd", project))
}
