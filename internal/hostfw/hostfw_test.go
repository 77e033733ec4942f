package hostfw_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/hostfw"
)

// requireFirewall fails the test where the rules cannot be applied, unless the process is not
// root, where the test is skipped: the rules need CAP_NET_ADMIN.
func requireFirewall(t *testing.T, f *hostfw.Firewall) {
	t.Helper()
	if err := f.Check(); err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("not root: %v", err)
		}
		t.Fatal(err)
	}
}

// fakeNetwork is a network id no engine holds, with a bridge that does not exist, so that its
// rule drops nothing.
func fakeNetwork(t *testing.T) hostfw.Network {
	id := strings.Repeat("0", 40) + strings.NewReplacer("/", "", "_", "").Replace(strings.ToLower(t.Name()))
	id = id[len(id)-40:]
	return hostfw.Network{ID: id, Bridge: hostfw.BridgeName(id, nil)}
}

func TestProtectRemoveAndRelease(t *testing.T) {
	f := hostfw.New()
	requireFirewall(t, f)
	n := fakeNetwork(t)
	t.Cleanup(func() { _ = f.Release(n.ID) })
	for range 2 { // idempotent
		if err := f.Protect(n); err != nil {
			t.Fatal(err)
		}
	}
	rules, err := f.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if got := countOf(rules, n); got != 1 {
		t.Fatalf("%d rules for %v after two Protects, want 1: %v", got, n, rules)
	}
	// The kernel's own listing names the rule as composebox's, by network id and bridge.
	out, err := exec.Command("nft", "list", "table", "inet", hostfw.Table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	want := `iifname "` + n.Bridge + `"`
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "composebox network "+n.ID) ||
		!strings.Contains(string(out), "ct state established,related accept") {
		t.Errorf("nft list lacks the rule of %v:\n%s", n, out)
	}

	// Remove takes exactly the rules listed: a rule added since (here, the same network's again
	// after its removal) is not among them.
	var listed []hostfw.Rule
	for _, r := range rules {
		if r.Network == n {
			listed = append(listed, r)
		}
	}
	removed, err := f.Remove(listed...)
	if err != nil || len(removed) != 1 {
		t.Fatalf("Remove(%v) removed %v, %v", listed, removed, err)
	}
	if err := f.Protect(n); err != nil {
		t.Fatal(err)
	}
	if removed, err := f.Remove(listed...); err != nil || len(removed) != 0 {
		t.Fatalf("second Remove(%v) removed %v, %v; want nothing", listed, removed, err)
	}
	if rules, _ := f.Rules(); countOf(rules, n) != 1 {
		t.Errorf("the rule protected after the listing is gone")
	}
	if err := f.Release(n.ID); err != nil {
		t.Fatal(err)
	}
	if rules, _ := f.Rules(); countOf(rules, n) != 0 {
		t.Errorf("rule of %v still there after Release", n)
	}
	if err := f.Release(n.ID); err != nil {
		t.Errorf("Release of a rule already gone: %v", err)
	}
}

func TestProtectRejectsBadNames(t *testing.T) {
	f := hostfw.New()
	for _, n := range []hostfw.Network{{}, {ID: "x"}, {ID: "x y", Bridge: "br-x"}, {ID: "x", Bridge: "a-very-long-interface-name"}} {
		if err := f.Protect(n); !errors.Is(err, errdefs.ErrInvalidConfig) {
			t.Errorf("Protect(%+v) = %v, want invalid_config", n, err)
		}
	}
}

func TestBridgeName(t *testing.T) {
	if got := hostfw.BridgeName("0123456789abcdef", nil); got != "br-0123456789ab" {
		t.Errorf("BridgeName = %q", got)
	}
	if got := hostfw.BridgeName("0123456789abcdef", map[string]string{"com.docker.network.bridge.name": "docker0"}); got != "docker0" {
		t.Errorf("BridgeName with a named bridge = %q", got)
	}
}

func countOf(rules []hostfw.Rule, n hostfw.Network) int {
	c := 0
	for _, r := range rules {
		if r.Network == n {
			c++
		}
	}
	return c
}
