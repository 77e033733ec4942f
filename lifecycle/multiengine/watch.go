package multiengine

import (
	"context"
	"sync"

	"github.com/composebox/composebox/orchestrator/backend"
)

// WatchDeaths follows every engine's deaths at once. When one engine's stream ends (the
// engine went away), the whole watch ends with that engine's error, so that the watcher checks
// for itself what still runs, and watches again.
func (b *Backend) WatchDeaths(ctx context.Context, opts backend.WatchOptions) (<-chan backend.Death, <-chan error) {
	ctx, cancel := context.WithCancel(ctx)
	deaths := make(chan backend.Death)
	done := make(chan error, 1)
	var once sync.Once
	end := func(err error) {
		once.Do(func() {
			done <- err
			cancel()
		})
	}
	var wg sync.WaitGroup
	for _, m := range b.members {
		if err := m.ready(ctx); err != nil {
			end(&backend.EngineError{Engine: m.name, Err: err})
			continue
		}
		ds, errs := m.b.WatchDeaths(ctx, opts)
		wg.Go(func() {
			for d := range ds {
				select {
				case deaths <- d:
				case <-ctx.Done():
				}
			}
			err := <-errs
			if ctx.Err() != nil && err == ctx.Err() {
				end(err)
				return
			}
			end(m.wrap(err))
		})
	}
	go func() {
		wg.Wait()
		end(ctx.Err())
		close(deaths)
	}()
	return deaths, done
}
