package dockerbackend

import (
	"context"

	"github.com/composebox/composebox/internal/egressgw"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Egress is lifecycle's Egress.
func (b *Backend) Egress(ctx context.Context, project string) (backend.EgressState, error) {
	st, err := b.engine.Egress(ctx, project)
	out := backend.EgressState{Allow: st.Allow, Services: st.Services, Ceiling: st.Ceiling, Denials: []backend.EgressDenial{}}
	for _, d := range st.Denials {
		out.Denials = append(out.Denials, backend.EgressDenial{Time: d.Time, Service: d.Service, Client: d.Client,
			Name: d.Name, Address: d.Address, Port: d.Port, Protocol: d.Protocol, Reason: d.Reason})
	}
	return out, err
}

// SetEgress is lifecycle's SetEgress.
func (b *Backend) SetEgress(ctx context.Context, project string, allow []string) error {
	return b.engine.SetEgress(ctx, project, allow)
}

var _ backend.EgressWatcher = (*Backend)(nil)

// WatchEgress is lifecycle's WatchEgress.
func (b *Backend) WatchEgress(ctx context.Context, project string, fn func(backend.EgressDenial)) error {
	return b.engine.WatchEgress(ctx, project, func(d egressgw.Denial) {
		fn(backend.EgressDenial{Time: d.Time, Service: d.Service, Client: d.Client,
			Name: d.Name, Address: d.Address, Port: d.Port, Protocol: d.Protocol, Reason: d.Reason})
	})
}

// EgressImage builds the egress gateway's image on this engine (another backend pushes it
// where its samples run).
func (b *Backend) EgressImage(ctx context.Context) (string, error) {
	return b.engine.EgressImage(ctx)
}
