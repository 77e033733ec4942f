package testutil

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// HostRoute gives the host a route to cidr for the test, as a LAN or a VPN would: an
// interface of the test's own (a bridge without ports: this kernel may lack the dummy driver), with the address addr (when not "") and a route to cidr in
// routing table table (0: the main table). The interface, and with it the route, is removed
// at the end of the test.
func HostRoute(t testing.TB, cidr, addr string, table int) string {
	t.Helper()
	dev := fmt.Sprintf("cbxt%d", time.Now().UnixNano()%1e9)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("link", "add", dev, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", dev).Run() })
	if addr != "" {
		ip("addr", "add", addr, "dev", dev)
	}
	ip("link", "set", dev, "up")
	if table != 0 || addr == "" {
		route := []string{"route", "replace", cidr, "dev", dev}
		if table != 0 {
			route = append(route, "table", fmt.Sprint(table))
		}
		ip(route...)
	}
	return dev
}
