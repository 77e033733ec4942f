package dockerbackend

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// WatchDeaths follows the engine's "die" events of the selected containers. The daemon
// replays the events since opts.Since, so a death while no stream was open is not missed.
func (b *Backend) WatchDeaths(ctx context.Context, opts backend.WatchOptions) (<-chan backend.Death, <-chan error) {
	f := filters.NewArgs(filters.Arg("type", "container"), filters.Arg("event", "die"))
	for _, l := range opts.Labels {
		f.Add("label", l)
	}
	lo := events.ListOptions{Filters: f}
	if !opts.Since.IsZero() {
		lo.Since = fmt.Sprintf("%d.%09d", opts.Since.Unix(), opts.Since.Nanosecond())
	}
	msgs, errs := b.raw.Events(ctx, lo)
	deaths := make(chan backend.Death)
	done := make(chan error, 1)
	go func() {
		defer close(deaths)
		for {
			select {
			case m := <-msgs:
				select {
				case deaths <- backend.Death{Project: m.Actor.Attributes[labels.ComposeProjectLabel], Service: m.Actor.Attributes[labels.ComposeServiceLabel],
					Container: m.Actor.Attributes["name"], ContainerID: m.Actor.ID}:
				case <-ctx.Done():
					done <- ctx.Err()
					return
				}
			case err := <-errs:
				done <- err
				return
			}
		}
	}()
	return deaths, done
}
