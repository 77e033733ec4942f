package tracking

import (
	"slices"
	"testing"
)

func TestNearNames(t *testing.T) {
	cands := []string{"cbx-web-1a2b3c", "cbx-web-1a2b3d", "cbx-db-ffffff", "other"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"cbx-web-1a2b3x", []string{"cbx-web-1a2b3c", "cbx-web-1a2b3d"}},
		{"nosuch", nil},
		{"cbx-db", []string{"cbx-db-ffffff"}},
		{"other", nil},
	} {
		if got := NearNames(tc.name, cands); !slices.Equal(got, tc.want) {
			t.Errorf("NearNames(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := DidYouMean("cbx-db", cands); got != " (did you mean cbx-db-ffffff?)" {
		t.Errorf("DidYouMean: %q", got)
	}
}
