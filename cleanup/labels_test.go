package cleanup

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

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
