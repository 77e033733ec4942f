package prereqs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/images"
)

func busyboxCheck(path string) Check {
	if path == "" {
		path = images.DefaultBusybox
	}
	if _, err := images.BaseRef(path); err != nil {
		return Check{Name: "busybox", Status: Fail, Detail: err.Error(),
			Fix: "Debian as root: apt-get install busybox-static (or `make docker`)"}
	}
	return Check{Name: "busybox", Status: Pass, Detail: path + " (rootfs of the base image)"}
}

func baseImageCheck(ctx context.Context, c client.APIClient, busybox string) Check {
	if busybox == "" {
		busybox = images.DefaultBusybox
	}
	ref, err := images.BaseRef(busybox)
	if err != nil {
		// Without busybox the current tag cannot be computed; an earlier build may still do.
		list, lerr := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", cleanup.LabelImage+"=base"))})
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

// pool is one of the daemon's default address pools: base split into subnets of size Size.
type pool struct {
	Base netip.Prefix
	Size int
}

// defaultPools are Engine 20.10's local-scope defaults (libnetwork ipamutils): 31 networks in
// all, the wall every per-sample-network harness runs into.
var defaultPools = []pool{
	{netip.MustParsePrefix("172.17.0.0/16"), 16},
	{netip.MustParsePrefix("172.18.0.0/16"), 16},
	{netip.MustParsePrefix("172.19.0.0/16"), 16},
	{netip.MustParsePrefix("172.20.0.0/14"), 16},
	{netip.MustParsePrefix("172.24.0.0/14"), 16},
	{netip.MustParsePrefix("172.28.0.0/14"), 16},
	{netip.MustParsePrefix("192.168.0.0/16"), 20},
}

// daemonPools reads default-address-pools from the local daemon.json, falling back to the
// engine's defaults. The API (1.41) does not report the pools, so this is best effort.
func daemonPools() ([]pool, string) {
	b, err := os.ReadFile("/etc/docker/daemon.json")
	if err != nil {
		return defaultPools, "engine defaults"
	}
	var cfg struct {
		Pools []struct {
			Base string `json:"base"`
			Size int    `json:"size"`
		} `json:"default-address-pools"`
	}
	if json.Unmarshal(b, &cfg) != nil || len(cfg.Pools) == 0 {
		return defaultPools, "engine defaults"
	}
	var out []pool
	for _, p := range cfg.Pools {
		pfx, err := netip.ParsePrefix(p.Base)
		if err != nil || p.Size < pfx.Bits() || p.Size > 32 {
			return defaultPools, "engine defaults (daemon.json pools unreadable)"
		}
		out = append(out, pool{pfx.Masked(), p.Size})
	}
	return out, "/etc/docker/daemon.json"
}

// FreeSlots counts, for each pool, how many more networks the daemon can carve from it, given
// the subnets already in use.
func FreeSlots(pools []pool, used []netip.Prefix) (free, total int) {
	for _, p := range pools {
		n := 1 << (p.Size - p.Base.Bits())
		total += n
		for i := range n {
			slot := nthSubnet(p, i)
			taken := false
			for _, u := range used {
				if slot.Overlaps(u) {
					taken = true
					break
				}
			}
			if !taken {
				free++
			}
		}
	}
	return free, total
}

func nthSubnet(p pool, i int) netip.Prefix {
	a := p.Base.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(i) << (32 - p.Size)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), p.Size)
}

func poolsCheck(ctx context.Context, c client.APIClient, info engine.Info) Check {
	nets, err := c.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return Check{Name: "address_pools", Status: Warn, Detail: "list networks: " + err.Error()}
	}
	var used []netip.Prefix
	for _, n := range nets {
		for _, cfg := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(cfg.Subnet); err == nil && p.Addr().Is4() {
				used = append(used, p.Masked())
			}
		}
	}
	pools, source := defaultPools, "engine defaults"
	if strings.HasPrefix(info.Host, "unix://") {
		pools, source = daemonPools()
	}
	free, total := FreeSlots(pools, used)
	detail := fmt.Sprintf("%d more bridge networks can be created from the default pools (%d of %d used; %s)", free, total-free, total, source)
	fix := "set default-address-pools in /etc/docker/daemon.json (e.g. {\"base\":\"10.200.0.0/16\",\"size\":24}) and restart dockerd, or remove unused networks (`composebox cleanup --stale`)"
	switch {
	case free == 0:
		return Check{Name: "address_pools", Status: Fail, Detail: detail, Fix: fix}
	case free < 8:
		return Check{Name: "address_pools", Status: Warn, Detail: detail, Fix: fix}
	}
	return Check{Name: "address_pools", Status: Pass, Detail: detail}
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
