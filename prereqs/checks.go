package prereqs

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/internal/images/imagespec"
	"github.com/composebox/composebox/internal/subnets"
)

func busyboxCheck(path string) Check {
	if path == "" {
		path = imagespec.DefaultBusybox
	}
	if _, err := imagespec.BaseRef(path); err != nil {
		return Check{Name: "busybox", Status: Fail, Detail: err.Error(),
			Fix: "Debian as root: apt-get install busybox-static (or `make docker`)"}
	}
	return Check{Name: "busybox", Status: Pass, Detail: path + " (rootfs of the base image)"}
}

func baseImageCheck(ctx context.Context, c client.APIClient, busybox string) Check {
	if busybox == "" {
		busybox = imagespec.DefaultBusybox
	}
	ref, err := imagespec.BaseRef(busybox)
	if err != nil {
		// Without busybox the current tag cannot be computed; an earlier build may still do.
		list, lerr := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelImage+"=base"))})
		if lerr == nil && len(list) > 0 && len(list[0].RepoTags) > 0 {
			return Check{Name: "base_image", Status: Warn, Detail: list[0].RepoTags[0] + " present, but it cannot be rebuilt: " + err.Error(),
				Fix: "apt-get install busybox-static"}
		}
		return Check{Name: "base_image", Status: Fail, Detail: "cannot build the base image: " + err.Error(),
			Fix: "Debian as root: apt-get install busybox-static (or `make docker`)"}
	}
	if _, err := c.ImageInspect(ctx, ref); err != nil {
		if client.IsErrNotFound(err) {
			return Check{Name: "base_image", Status: Warn, Detail: ref + " not built yet; it is built on first use (about a second)",
				Fix: "run any task, or `composebox doctor --build`"}
		}
		return Check{Name: "base_image", Status: Fail, Detail: "inspect " + ref + ": " + err.Error()}
	}
	return Check{Name: "base_image", Status: Pass, Detail: ref + " present"}
}

// FreeSlots counts, over pools, how many more networks can be carved given the subnets already
// in use, and how many the pools hold in all.
func FreeSlots(pools []subnets.Pool, used []netip.Prefix) (free, total int) {
	for _, p := range pools {
		free += p.Free(used)
		total += p.Size()
	}
	return free, total
}

// poolsChecks report, pool by pool, how many more networks can be created: from the daemon's
// default pools (what compose and `docker network create` use) and from composebox's managed
// subnet pool (what samples use unless managed subnets are off).
func poolsChecks(ctx context.Context, c client.APIClient, info engine.Info, opts Options) []Check {
	nets, err := c.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return []Check{{Name: "address_pools", Status: Warn, Detail: "list networks: " + err.Error()}}
	}
	var used []netip.Prefix
	for _, n := range nets {
		for _, cfg := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(cfg.Subnet); err == nil && p.Addr().Is4() {
				used = append(used, p.Masked())
			}
		}
	}
	local := strings.HasPrefix(info.Host, "unix://")
	pools, source := subnets.DaemonDefaults, "engine defaults"
	if local {
		pools, source = subnets.DaemonPools(subnets.DaemonConfig)
	}
	free, _ := FreeSlots(pools, used)
	var per []string
	for _, p := range pools {
		per = append(per, fmt.Sprintf("%s as /%d: %d of %d free", p.Base, p.Bits, p.Free(used), p.Size()))
	}
	detail := fmt.Sprintf("%d more bridge networks from the daemon's default pools (%s; %s)", free, source, strings.Join(per, ", "))
	fix := "set default-address-pools in /etc/docker/daemon.json (e.g. {\"base\":\"10.200.0.0/16\",\"size\":24}) and restart dockerd, or remove unused networks (`composebox cleanup --stale`)"
	daemon := Check{Name: "address_pools", Status: Pass, Detail: detail}
	switch {
	case free == 0 && opts.Subnets.Disabled:
		daemon.Status, daemon.Fix = Fail, fix+"; or turn managed subnets on"
	case free < 8:
		// Samples do not need these while managed subnets are on; other networks still do.
		daemon.Status, daemon.Fix = Warn, fix
	}
	return []Check{daemon, managedCheck(opts.Subnets, used, local)}
}

func managedCheck(s SubnetOptions, used []netip.Prefix, local bool) Check {
	if s.Disabled {
		return Check{Name: "managed_subnets", Status: Warn, Detail: "off: sample networks come from the daemon's default pools",
			Fix: "drop --no-managed-subnets (backends.Subnets.Disabled)"}
	}
	pool, err := subnets.Configured(s.Pool, s.Bits)
	if err != nil {
		return Check{Name: "managed_subnets", Status: Fail, Detail: err.Error(), Fix: "--subnet-pool / --subnet-bits"}
	}
	var clash []string
	for _, d := range subnets.DaemonDefaults {
		if d.Base.Overlaps(pool.Base) {
			clash = append(clash, d.Base.String())
		}
	}
	taken := used
	if local {
		if routes, err := subnets.HostRoutes(); err == nil {
			taken = append(taken, routes...)
		}
	}
	free := pool.Free(taken)
	detail := fmt.Sprintf("%d more sample networks from %s (%d of %d in use)", free, pool, pool.Size()-free, pool.Size())
	fix := "a larger or different pool: --subnet-pool / --subnet-bits (backends.Config.Subnets), or `composebox cleanup --stale`"
	switch {
	case free == 0:
		return Check{Name: "managed_subnets", Status: Fail, Detail: detail, Fix: fix}
	case len(clash) > 0:
		return Check{Name: "managed_subnets", Status: Warn, Detail: detail + "; it overlaps the daemon's default pools " + strings.Join(clash, ", "),
			Fix: "choose a pool outside 172.16.0.0/12 and 192.168.0.0/16"}
	case free < 64:
		return Check{Name: "managed_subnets", Status: Warn, Detail: detail, Fix: fix}
	}
	return Check{Name: "managed_subnets", Status: Pass, Detail: detail}
}

const gib = 1 << 30

func diskCheck(sys system.Info, info engine.Info) Check {
	dir := sys.DockerRootDir
	if !strings.HasPrefix(info.Host, "unix://") || dir == "" {
		return Check{Name: "disk", Status: Warn, Detail: "the daemon is remote; its disk cannot be checked from here"}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Check{Name: "disk", Status: Warn, Detail: fmt.Sprintf("statfs %s: %v", dir, err)}
	}
	free := st.Bavail * uint64(st.Bsize)
	detail := fmt.Sprintf("%.1f GiB free under %s", float64(free)/gib, dir)
	fix := "free space: `composebox cleanup --images`, `docker system prune`"
	switch {
	case free < 1*gib:
		return Check{Name: "disk", Status: Fail, Detail: detail, Fix: fix}
	case free < 10*gib:
		return Check{Name: "disk", Status: Warn, Detail: detail, Fix: fix}
	}
	return Check{Name: "disk", Status: Pass, Detail: detail}
}

// hostFirewallCheck says whether samples' networks can be kept off the host's own addresses:
// without that, SampleInit fails unless the policy opts in to host access.
func hostFirewallCheck(info engine.Info, hostAccess bool) Check {
	const name = "host_firewall"
	fix := "run composebox as root on a kernel with nftables (nf_tables), or opt out with --allow host-access"
	if !strings.HasPrefix(info.Host, "unix://") {
		return Check{Name: name, Status: Warn, Detail: "the daemon is remote: this host's firewall does not guard its host",
			Fix: "run composebox on the daemon's host"}
	}
	fw := hostfw.New()
	if err := fw.Check(); err != nil {
		if hostAccess {
			return Check{Name: name, Status: Warn, Detail: "off (--allow host-access); it could not be applied anyway: " + err.Error()}
		}
		return Check{Name: name, Status: Fail, Detail: err.Error() + ": samples will not start", Fix: fix}
	}
	rules, err := fw.Rules()
	if err != nil {
		return Check{Name: name, Status: Warn, Detail: err.Error()}
	}
	detail := fmt.Sprintf("nftables table inet %s drops traffic from sample networks and builds to this host's addresses (%d networks protected)", hostfw.Table, len(rules))
	if hostAccess {
		return Check{Name: name, Status: Warn, Detail: "works, but the policy opts out (--allow host-access): samples reach this host's addresses"}
	}
	return Check{Name: name, Status: Pass, Detail: detail}
}
