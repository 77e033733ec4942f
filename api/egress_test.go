package api

import (
	"slices"
	"testing"

	"github.com/composebox/composebox/compose"
)

// TestNarrowEgress: a request's egress within the server's --egress is taken; beyond it, each
// name is refused naming the serve flag that would allow it.
func TestNarrowEgress(t *testing.T) {
	c := Ceiling{Policy: compose.Policy{Egress: []string{"*.pypi.test", "pkgs.test"}}}
	var refused []string
	beyond := func(_, value, _, flag string) { refused = append(refused, value+" "+flag) }
	var p compose.Policy
	if err := c.narrowEgress([]string{"files.pypi.test", "pkgs.test:443"}, &p, beyond); err != nil || len(refused) != 0 {
		t.Fatalf("within the ceiling: %v %v", err, refused)
	}
	if !slices.Equal(p.Egress, []string{"files.pypi.test", "pkgs.test:443"}) {
		t.Errorf("egress = %v", p.Egress)
	}
	if err := c.narrowEgress([]string{"other.test"}, &p, beyond); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(refused, []string{"other.test --egress other.test"}) {
		t.Errorf("refused = %v", refused)
	}
	if err := c.narrowEgress([]string{"a b"}, &p, beyond); err == nil {
		t.Error("a rule that is not one was taken")
	}
}
