package cleanup_test

import (
	"testing"

	"github.com/composebox/composebox/cleanup"
)

// StateProject reads back the project whose state repository a tag is in, and nothing else.
func TestStateProject(t *testing.T) {
	for _, c := range []struct {
		tag, project string
		ok           bool
	}{
		{cleanup.StateRepo("cbx-t-1a2b") + ":snap.base.web", "cbx-t-1a2b", true},
		{cleanup.StateRepo("cbx-t-1a2b") + ":run.default", "cbx-t-1a2b", true},
		{"composebox-state/:run.default", "", false},
		{"composebox-state/cbx-t-1a2b", "", false},
		{"library/alpine:3", "", false},
		{"registry.local/composebox-state/cbx-t:run.x", "", false},
	} {
		p, ok := cleanup.StateProject(c.tag)
		if p != c.project || ok != c.ok {
			t.Errorf("StateProject(%q) = %q, %v; want %q, %v", c.tag, p, ok, c.project, c.ok)
		}
	}
}
