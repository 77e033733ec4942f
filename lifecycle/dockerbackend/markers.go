package dockerbackend

import (
	"context"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Markers are marker volumes (cleanup/tracking): a claim is the removal of the warm marker,
// which the daemon lets exactly one caller win.

func (b *Backend) MarkDetached(ctx context.Context, m backend.Marker) error {
	return tracking.MarkDetached(ctx, b.raw, m.Project, m.Task, m.Sample)
}

func (b *Backend) MarkWarm(ctx context.Context, m backend.WarmMarker) error {
	return tracking.MarkWarm(ctx, b.raw, m.Project, m.Task, m.Sample, m.Owner, m.Fingerprint, m.Shared)
}

func (b *Backend) Claim(ctx context.Context, m backend.Marker) (bool, error) {
	return tracking.Claim(ctx, b.raw, m.Project, m.Task, m.Sample, m.Owner)
}

func (b *Backend) Take(ctx context.Context, project string) (bool, error) {
	return tracking.Take(ctx, b.raw, project)
}

func (b *Backend) RecordClaim(ctx context.Context, m backend.Marker) error {
	return tracking.RecordClaim(ctx, b.raw, m.Project, m.Task, m.Sample, m.Owner)
}

func (b *Backend) WarmProjects(ctx context.Context, task string) ([]backend.WarmProject, error) {
	warm, err := tracking.WarmProjects(ctx, b.raw, task)
	out := make([]backend.WarmProject, len(warm))
	for i, w := range warm {
		out[i] = backend.WarmProject{Created: w.Created, WarmMarker: backend.WarmMarker{
			Marker:      backend.Marker{Project: w.Project, Task: w.Task, Sample: w.Sample, Owner: w.Owner},
			Fingerprint: w.Fingerprint, Shared: w.Shared,
		}}
	}
	return out, err
}
