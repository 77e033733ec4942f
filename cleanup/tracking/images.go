package tracking

import (
	"context"
	"fmt"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/orchestrator/backend"
)

// LiveTasks maps each live task to why it is live, for cleanup.PruneImages to keep its images
// (ImageOptions.Keep). A task is live while it has a project that is not stale (alive, detached,
// or owned on another host), or while a live process holds it in cache (TaskInit done, Cleanup
// not yet), even while it has no sample running. cache may be nil.
func LiveTasks(ctx context.Context, c client.APIClient, cache *Cache) (map[string]string, error) {
	live := map[string]string{}
	projects, err := List(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("find live tasks: %w", err)
	}
	for _, p := range projects {
		if !p.Stale && live[p.Task] == "" {
			live[p.Task] = fmt.Sprintf("task has a %s project, %s", p.Status, p.Name)
		}
	}
	if cache != nil {
		holds, err := cache.Tasks()
		if err != nil {
			return nil, fmt.Errorf("find live tasks: %w", err)
		}
		for _, h := range holds {
			if OwnerStatus(h.Owner) != backend.StatusStale && live[h.Task] == "" {
				live[h.Task] = "task is held by process " + h.Owner
			}
		}
	}
	return live, nil
}
