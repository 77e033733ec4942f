package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/testutil"
)

// TestMain fails the package if its tests left any resource owned by this process behind. A
// watchdog started with WithReaper is this test binary re-run, so it runs first.
func TestMain(m *testing.M) {
	if tracking.ReaperMain() {
		return
	}
	testutil.LeakCheck(m, leftovers)
}

func leftovers(ctx context.Context, c client.APIClient) error {
	n, err := testutil.Count(ctx, c, filters.Arg("label", labels.LabelOwner+"="+labels.SelfOwner()))
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d containers, networks and volumes left behind", n)
	}
	return nil
}
