package orchestrator

import (
	"context"

	"github.com/composebox/composebox/orchestrator/backend"
)

// DoctorOptions configures Doctor. The zero value checks the engine's setup as it is.
type DoctorOptions struct {
	// Build builds composebox's base image first when the engine answers and lacks it.
	Build bool
	// Extra are checks the caller computed about the engine's use (the policy in force),
	// appended after the engine's own when it answers.
	Extra []backend.Check
	// Local are checks that need no engine (the task's), appended last even when it does not
	// answer; a failed one fails the report.
	Local []backend.Check
	// HostAccess is the policy's host-access opt-in: a host firewall that cannot be applied is
	// then only a warning.
	HostAccess bool
}

// Doctor checks that the backend can run composebox (for Docker: the daemon, its API
// version, the storage driver, the base image, free networks per address pool, disk) and
// returns one check per line of `composebox doctor`. It fails only when Build fails: a check
// that fails is in the report.
func (o *Orchestrator) Doctor(ctx context.Context, opts DoctorOptions) (backend.Report, error) {
	if opts.Build {
		// An engine that does not answer is the report's to say, not an error of the build.
		if _, err := o.backend.Ping(ctx, o.cfg.pingTimeout); err == nil {
			if _, err := o.backend.BaseImage(ctx); err != nil {
				return backend.Report{}, err
			}
		}
	}
	r := backend.RunDoctor(ctx, o.backend, backend.DoctorOptions{PingTimeout: o.cfg.pingTimeout, Extra: opts.Extra, HostAccess: opts.HostAccess})
	// Whether samples can fork matters only on a backend that can run them; a report that
	// already fails (an engine that does not answer) says nothing more.
	if r.OK {
		r.Checks = append(r.Checks, o.forkCheck())
	}
	for _, c := range opts.Local {
		r.Checks = append(r.Checks, c)
		if c.Status == backend.Fail {
			r.OK = false
		}
	}
	return r, nil
}
