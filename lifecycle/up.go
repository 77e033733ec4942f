package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/compose/v2/pkg/api"
)

// UpOptions configures Up. The zero value starts every service.
type UpOptions struct {
	// Services limits Up to these services (and their dependencies). Empty means all.
	Services []string
}

// createTimeout bounds the create phase, which runs detached from the caller's context.
const createTimeout = 2 * time.Minute

// Up creates and starts the project's containers, like `docker compose up -d` without --wait:
// readiness is Wait's job, because compose's own wait can return success when its deadline
// passes. The project must be normalised (compose labels on every service): the library does
// not add them itself. Images must exist locally; Up never builds.
//
// The create phase runs to completion even when ctx is cancelled: a create request the engine
// already accepted would otherwise land after the caller's teardown had listed the project, and
// leak. Cancellation takes effect before the start phase and during it.
func (e *Engine) Up(ctx context.Context, p *types.Project, opts UpOptions) error {
	services := opts.Services
	if len(services) == 0 {
		services = p.ServiceNames()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	err := e.compose.Create(cctx, p, api.CreateOptions{
		Services:             services,
		Recreate:             api.RecreateDiverged,
		RecreateDependencies: api.RecreateDiverged,
		Inherit:              true,
		QuietPull:            true,
		AssumeYes:            true,
	})
	if err != nil {
		return fmt.Errorf("up project %s: create: %w", p.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("up project %s: %w", p.Name, err)
	}
	if err := e.compose.Start(ctx, p.Name, api.StartOptions{Project: p, Services: services}); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("up project %s: start: %w", p.Name, err)
	}
	return nil
}
