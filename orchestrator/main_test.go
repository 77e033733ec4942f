package orchestrator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/internal/testutil"
)

// TestMain fails the package if its tests left any resource owned by this process behind.
func TestMain(m *testing.M) { testutil.LeakCheck(m, leftovers) }

func leftovers(ctx context.Context, c client.APIClient) error {
	n, err := testutil.Count(ctx, c, filters.Arg("label", cleanup.LabelOwner+"="+cleanup.SelfOwner()))
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%d containers, networks and volumes left behind", n)
	}
	return nil
}
