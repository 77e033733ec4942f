package orchestrator_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// twoServiceYAML is the scale shape: two services on the project's default network, no IPAM of
// the file's own, and healthchecks at Docker's default 30 s interval.
const twoServiceYAML = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      peer: {condition: service_healthy}
  peer:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["nc", "-ll", "-p", "7000", "-e", "echo", "pong"]
    healthcheck:
      test: ["CMD-SHELL", "nc -w 1 127.0.0.1 7000 </dev/null | grep -q pong"]
      interval: 30s
`

// 40 samples live at once: more networks than the daemon's default pools hold (31), so plain
// compose would fail partway; with managed subnets every sample gets a /27 of the pool and the
// default pools are not touched.
func TestFortyLiveSamplesWithManagedSubnets(t *testing.T) {
	const n = 40
	pool := netip.MustParsePrefix("10.216.0.0/20")
	o, _ := newOrchestrator(t, orchestrator.WithSubnets(orchestrator.Subnets{Pool: pool}))
	c := dockerClient(t, o)
	defaultBefore := defaultPoolNetworks(t, c)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "forty", YAML: []byte(twoServiceYAML)})

	samples := startSamples(t, task, n)

	seen := map[string]string{}
	for _, s := range samples {
		nets, err := c.NetworkList(t.Context(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", projectLabel(s.Project())))})
		if err != nil || len(nets) != 1 || len(nets[0].IPAM.Config) != 1 {
			t.Fatalf("%s networks = %+v, %v; want one with one subnet", s.Project(), nets, err)
		}
		sub := netip.MustParsePrefix(nets[0].IPAM.Config[0].Subnet)
		if !pool.Overlaps(sub) || sub.Bits() != 27 {
			t.Errorf("%s has subnet %s, not a /27 of %s", s.Project(), sub, pool)
		}
		if other, dup := seen[sub.String()]; dup {
			t.Errorf("%s and %s share %s", s.Project(), other, sub)
		}
		seen[sub.String()] = s.Project()
	}
	// All 40 are live at the same time, and answer across their own network.
	for _, s := range samples[:3] {
		r, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "nc -w 10 peer 7000 </dev/null"}})
		if err != nil || string(r.Stdout) != "pong\n" {
			t.Errorf("%s: default → peer: %+v, %v", s.Project(), r, err)
		}
	}
	live, err := testutil.Count(t.Context(), c, filters.Arg("label", labels.LabelTask+"=forty"), filters.Arg("label", labels.LabelOwner+"="+labels.SelfOwner()))
	if err != nil || live < 3*n { // 2 containers and a network per sample
		t.Errorf("resources live at once = %d (%v), want at least %d", live, err, 3*n)
	}
	if after := defaultPoolNetworks(t, c); after != defaultBefore {
		t.Errorf("networks numbered from the daemon's default pools went from %d to %d", defaultBefore, after)
	}

	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatalf("task cleanup: %v", err)
	}
	left, err := testutil.Count(t.Context(), c, filters.Arg("label", labels.LabelTask+"=forty"), filters.Arg("label", labels.LabelOwner+"="+labels.SelfOwner()))
	if err != nil || left != 0 {
		t.Errorf("after cleanup %d resources remain (%v)", left, err)
	}
}

// defaultPoolNetworks counts networks whose subnet lies in 172.16.0.0/12 or 192.168.0.0/16.
func defaultPoolNetworks(t *testing.T, c interface {
	NetworkList(context.Context, network.ListOptions) ([]network.Summary, error)
}) int {
	t.Helper()
	nets, err := c.NetworkList(t.Context(), network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defaults := []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16")}
	n := 0
	for _, nw := range nets {
		for _, cfg := range nw.IPAM.Config {
			if s, err := netip.ParsePrefix(cfg.Subnet); err == nil && (defaults[0].Overlaps(s) || defaults[1].Overlaps(s)) {
				n++
			}
		}
	}
	return n
}
