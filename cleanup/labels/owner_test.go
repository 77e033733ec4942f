package labels

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestParseOwner(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Owner
		ok   bool
	}{
		{"vm:12:345", Owner{"vm", 12, 345}, true},
		{"host:with:colons:7:8", Owner{"host:with:colons", 7, 8}, true},
		{"detached", Owner{}, false},
		{"", Owner{}, false},
		{"vm:x:1", Owner{}, false},
		{"vm:0:1", Owner{}, false},
		{"vm:1:-1", Owner{}, false},
		{":1:1", Owner{}, false},
	} {
		got, err := ParseOwner(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseOwner(%q) = %+v, %v; want %+v, ok=%t", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestSelfOwner(t *testing.T) {
	parts := strings.Split(SelfOwner(), ":")
	if len(parts) != 3 {
		t.Fatalf("owner %q is not host:pid:start", SelfOwner())
	}
	if parts[1] != strconv.Itoa(os.Getpid()) {
		t.Errorf("owner pid %s, want %d", parts[1], os.Getpid())
	}
	start, err := ProcessStartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if start == 0 || parts[2] != strconv.FormatUint(start, 10) {
		t.Errorf("owner start %s, want %d", parts[2], start)
	}
}

func TestProcessStartTimeOfMissingPid(t *testing.T) {
	if _, err := ProcessStartTime(1 << 30); err == nil {
		t.Error("no error for a pid that cannot exist")
	}
}
