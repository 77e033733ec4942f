package tracking_test

import (
	"context"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/internal/testutil"
)

// A teardown cut off between removing a network and its firewall rule leaves the rule behind:
// cleanup (RemovePlanned, which the cleanup verb and the reaper run) removes it, and keeps the
// rule of a network that still exists.
func TestCleanupPrunesLeftoverFirewallRules(t *testing.T) {
	c := testutil.Docker(t)
	fw := hostfw.New()
	if err := fw.Check(); err != nil {
		t.Fatal(err)
	}
	live, err := c.NetworkCreate(t.Context(), unique("fw"), network.CreateOptions{Driver: "bridge", Labels: testutil.Labels(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.NetworkRemove(context.Background(), live.ID)
		_ = fw.Release(live.ID)
	})
	// A network that no longer exists: created, protected, then removed behind composebox's back.
	gone, err := c.NetworkCreate(t.Context(), unique("fw-gone"), network.CreateOptions{Driver: "bridge", Labels: testutil.Labels(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Release(gone.ID) })
	for _, id := range []string{live.ID, gone.ID} {
		if err := fw.Protect(hostfw.Network{ID: id, Bridge: hostfw.BridgeName(id, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.NetworkRemove(t.Context(), gone.ID); err != nil {
		t.Fatal(err)
	}
	if !ruleOf(t, fw, gone.ID) {
		t.Fatal("no leftover rule to prune: the test cannot tell")
	}

	if _, err := tracking.RemovePlanned(t.Context(), c, nil, cleanup.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if ruleOf(t, fw, gone.ID) {
		t.Error("cleanup left the rule of a removed network")
	}
	if !ruleOf(t, fw, live.ID) {
		t.Error("cleanup removed the rule of a network that still exists")
	}
}

func ruleOf(t *testing.T, fw *hostfw.Firewall, id string) bool {
	t.Helper()
	rules, err := fw.Rules()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(rules, func(r hostfw.Rule) bool { return r.ID == id })
}
