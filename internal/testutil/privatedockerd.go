package testutil

import (
	"net"
	"testing"

	"github.com/composebox/composebox/internal/testutil/dockerd"
)

// PrivateDockerd starts a dockerd of the test's own (internal/testutil/dockerd): its own data
// and exec roots, socket, pid file and bridge, so that stopping it touches nothing else on the
// host. It is stopped, and its bridge and directories removed, at the end of the test. The test
// is skipped where no private daemon can be started (not root, no dockerd).
func PrivateDockerd(t testing.TB, opts dockerd.Options) *dockerd.Daemon {
	t.Helper()
	if err := dockerd.Available(); err != nil {
		t.Skip(err)
	}
	// The host daemon's bridge must outlive the private one.
	if _, err := net.InterfaceByName("docker0"); err == nil {
		t.Cleanup(func() {
			if _, err := net.InterfaceByName("docker0"); err != nil {
				t.Errorf("the host's docker0 is gone after a private daemon ran: %v", err)
			}
		})
	}
	d, err := dockerd.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Remove)
	return d
}
