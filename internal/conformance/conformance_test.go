package conformance

import (
	"strings"
	"testing"
)

// The suite itself runs from the packages that implement Sandbox (lifecycle/sandboxio and
// orchestrator); here only its shape is checked.
func TestCases(t *testing.T) {
	cs := Cases()
	if len(cs) < 40 {
		t.Fatalf("%d cases, the contract's coverage needs at least 40", len(cs))
	}
	seen := map[string]bool{}
	groups := map[string]int{}
	for _, c := range cs {
		if c.Name == "" || c.Run == nil {
			t.Fatalf("incomplete case %+v", c)
		}
		if seen[c.Name] {
			t.Fatalf("duplicate case %q", c.Name)
		}
		seen[c.Name] = true
		group, _, _ := strings.Cut(c.Name, "/")
		groups[group]++
	}
	for _, g := range []string{"file", "exec", "stdin", "stream", "unavailable"} {
		if groups[g] == 0 {
			t.Errorf("no %s cases", g)
		}
	}
}

func TestSafeName(t *testing.T) {
	if got := safeName("TestX/user=root/file/a b"); got != "TestX_user_root_file_a_b" {
		t.Fatalf("safeName: %q", got)
	}
}
