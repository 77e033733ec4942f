package tracking_test

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
)

// Two engines on one host: a cleanup on one engine keeps the firewall rule of the other's
// network, whose bridge is on this host too. (It would otherwise open that network's samples to
// the host's own addresses.)
func TestCleanupKeepsAnotherEnginesFirewallRules(t *testing.T) {
	host := testutil.Docker(t)
	fw := hostfw.New()
	if err := fw.Check(); err != nil {
		t.Fatal(err)
	}
	d := testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxef"})
	other, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	n, err := other.NetworkCreate(t.Context(), unique("fw-other"), network.CreateOptions{Driver: "bridge", Labels: testutil.Labels(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = other.NetworkRemove(context.Background(), n.ID)
		_ = fw.Release(n.ID)
	})
	if err := fw.Protect(hostfw.Network{ID: n.ID, Bridge: hostfw.BridgeName(n.ID, nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tracking.RemovePlanned(t.Context(), host, nil, cleanup.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if !ruleOf(t, fw, n.ID) {
		t.Fatal("a cleanup on the host's engine removed the rule of another engine's live network")
	}
}
