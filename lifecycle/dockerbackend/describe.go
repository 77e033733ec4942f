package dockerbackend

import "github.com/composebox/composebox/orchestrator/backend"

// Describe says how to make this backend again in another process (the reaper's watchdog):
// the environment's engine, or the daemon host of the client it was given.
func (b *Backend) Describe() (backend.Description, error) {
	d := backend.Description{Kind: b.Kind()}
	if !b.fromEnv {
		d.Endpoint = b.Endpoint()
	}
	return d, nil
}

var _ backend.Describer = (*Backend)(nil)
