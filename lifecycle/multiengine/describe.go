package multiengine

import "github.com/composebox/composebox/orchestrator/backend"

var _ backend.Describer = (*Backend)(nil)

// Describe says how to make these engines again in another process (the reaper's watchdog):
// each by its name and its endpoint as configured (context:NAME and TLS directories kept), or,
// for a member given as a backend, as that backend describes itself, else its daemon host.
func (b *Backend) Describe() (backend.Description, error) {
	d := backend.Description{Kind: b.Kind()}
	for _, m := range b.members {
		ep := m.configured
		if ep == "" {
			if ds, ok := m.b.(backend.Describer); ok {
				if md, err := ds.Describe(); err == nil {
					ep = md.Endpoint
				}
			}
		}
		if ep == "" {
			ep = m.b.Endpoint()
		}
		d.Engines = append(d.Engines, backend.DescribedEngine{Name: m.name, Endpoint: ep})
	}
	return d, nil
}
