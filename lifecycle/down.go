package lifecycle

import (
	"context"
	"time"

	"github.com/composebox/composebox/cleanup"
)

// DownOptions configures Down. The zero value is the sandbox default (1 s stop grace).
type DownOptions struct {
	// Grace is the stop grace before SIGKILL; negative kills at once.
	Grace time.Duration
}

// Down removes the project's containers, networks and volumes, found by labels alone, like
// `docker compose down -v` but for a project with no containers left as well. Removing a
// project that does not exist is not an error.
func (e *Engine) Down(ctx context.Context, project string, opts DownOptions) (cleanup.Removed, error) {
	return cleanup.RemoveProject(ctx, e.api, project, cleanup.RemoveOptions{Grace: opts.Grace})
}
