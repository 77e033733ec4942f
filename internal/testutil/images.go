package testutil

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// LabelledImages lists the IDs of every image carrying label ("key=value"), dangling and
// intermediate ones included.
func LabelledImages(t testing.TB, c client.APIClient, label string) []string {
	t.Helper()
	ids, err := labelledImages(t.Context(), c, label)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func labelledImages(ctx context.Context, c client.APIClient, label string) ([]string, error) {
	list, err := c.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, im := range list {
		ids = append(ids, im.ID)
	}
	return ids, nil
}

// RemoveLabelledImages registers the removal, at the end of the test, of every image carrying
// label: what a test's builds leave behind, whether or not the code under test removed it.
func RemoveLabelledImages(t testing.TB, c client.APIClient, label string) {
	t.Cleanup(func() {
		ids, err := labelledImages(context.Background(), c, label)
		if err != nil {
			t.Errorf("list images %s: %v", label, err)
			return
		}
		for _, id := range ids {
			_, err := c.ImageRemove(context.Background(), id, imageRemoveOptions())
			if err != nil && !client.IsErrNotFound(err) {
				t.Errorf("remove image %s: %v", id, err)
			}
		}
	})
}
