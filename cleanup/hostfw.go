package cleanup

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/hostfw"
)

// PruneHostFirewall removes the host firewall's rules of networks the engine no longer has and
// whose bridge is gone from this host: what a teardown interrupted between removing a network
// and its rule left, or a network removed behind composebox's back. The rules of another
// engine's networks on this same host stay. It returns how many rules it removed. A host without the
// firewall has none to remove.
func PruneHostFirewall(ctx context.Context, c client.APIClient) (int, error) {
	fw := hostfw.New()
	rules, err := fw.Rules()
	if errors.Is(err, hostfw.ErrUnavailable) {
		return 0, nil // not root: it could not have made any, nor can it remove them
	}
	if err != nil || len(rules) == 0 {
		return 0, err
	}
	// The rules are read before the networks are listed: a network created after the listing
	// has its rule added after it too, and a rule read here belongs to a network that existed
	// before the listing began or is gone.
	nets, err := c.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("prune host firewall: list networks: %w", err)
	}
	existing := map[string]bool{}
	for _, n := range nets {
		existing[n.ID] = true
	}
	var doomed []hostfw.Rule
	for _, r := range rules {
		// A network this engine does not have may be another engine's on this same host
		// (several engines, one machine): its bridge is still here, and so is its rule.
		if _, err := net.InterfaceByName(r.Bridge); !existing[r.ID] && err != nil {
			doomed = append(doomed, r)
		}
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	removed, err := fw.Remove(doomed...)
	if err != nil {
		return len(removed), fmt.Errorf("prune host firewall: %w", err)
	}
	return len(removed), nil
}
