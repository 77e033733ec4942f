package tracking

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

func TestOwnerStatus(t *testing.T) {
	host, _ := os.Hostname()
	self, err := labels.ParseOwner(labels.SelfOwner())
	if err != nil {
		t.Fatal(err)
	}
	zombie := exec.Command("sleep", "600")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Process.Kill(); _ = zombie.Wait() })
	zstart, err := labels.ProcessStartTime(zombie.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	zlabel := fmt.Sprintf("%s:%d:%d", host, zombie.Process.Pid, zstart)
	if s := OwnerStatus(zlabel); s != backend.StatusAlive {
		t.Fatalf("running child: %s, want alive", s)
	}
	// Killed but not yet waited for: a zombie still has its /proc entry and start time.
	if err := zombie.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { st, _, _ := labels.ProcessStat(zombie.Process.Pid); return st == 'Z' })

	for _, tc := range []struct {
		name, owner string
		want        backend.OwnerStatus
	}{
		{"self", labels.SelfOwner(), backend.StatusAlive},
		{"detached", labels.OwnerDetached, backend.StatusDetached},
		{"another host", "elsewhere.example:1:1", backend.StatusUnknown},
		{"malformed", "not-an-owner", backend.StatusUnknown},
		{"empty", "", backend.StatusUnknown},
		{"pid reused by another process", fmt.Sprintf("%s:%d:%d", host, self.PID, self.Start+1), backend.StatusStale},
		{"no such pid", fmt.Sprintf("%s:%d:1", host, 1<<22+12345), backend.StatusStale},
		{"zombie", zlabel, backend.StatusStale},
	} {
		if got := OwnerStatus(tc.owner); got != tc.want {
			t.Errorf("%s: OwnerStatus(%q) = %s, want %s", tc.name, tc.owner, got, tc.want)
		}
	}
	_ = zombie.Wait()
	if got := OwnerStatus(zlabel); got != backend.StatusStale {
		t.Errorf("reaped child: %s, want stale", got)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		<-tick.C
	}
}
