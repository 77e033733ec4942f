package tracking_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
)

// TestReapSweepsEveryEngine: a watchdog given several engines removes its dead owner's
// projects from each of them.
func TestReapSweepsEveryEngine(t *testing.T) {
	host := testutil.Docker(t)
	d := testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxer"})
	priv, err := d.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = priv.Close() })
	task := unique("reap-engines")
	watched := startOwner(t)
	onHost := fakeProject(t, host, fakeSpec{Task: task, Owner: watched.label})
	onPriv := fakeProject(t, priv, fakeSpec{Task: task, Owner: watched.label, Volume: true})
	var engines []engine.Endpoint
	for _, s := range []string{host.DaemonHost(), d.Endpoint()} {
		ep, err := engine.ParseEndpoint(s)
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, ep)
	}
	watched.kill()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := tracking.Reap(ctx, watched.label, tracking.ReapOptions{Interval: 20 * time.Millisecond, Engines: engines, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.Name)
	}
	if !slices.Contains(got, onHost) || !slices.Contains(got, onPriv) {
		t.Fatalf("reaped %v, want %s (host's engine) and %s (the private one)", got, onHost, onPriv)
	}
	if n := testutil.Resources(t, host, projectLabel(onHost)) + testutil.Resources(t, priv, projectLabel(onPriv)); n != 0 {
		t.Fatalf("%d resources left after the reap", n)
	}
}
