package prereqs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/engine"
)

// HealthTimeout bounds CheckHealth, as agent sandboxes bound their `docker info` health check.
const HealthTimeout = 2500 * time.Millisecond

// HealthState is one of the four outcomes of an engine health check.
type HealthState string

const (
	// HealthMissing: there is no engine to ask. Where a CLI-based check says "docker CLI not
	// found", composebox needs no CLI, so its counterpart is an endpoint that cannot be resolved (a
	// DOCKER_CONTEXT that does not exist) or a unix socket that is not there.
	HealthMissing HealthState = "missing"
	// HealthTimedOut: the engine did not answer within the timeout.
	HealthTimedOut HealthState = "timed_out"
	// HealthUnavailable: the engine answered with an error, or refused the connection.
	HealthUnavailable HealthState = "unavailable"
	// HealthReady: the engine answered with its version.
	HealthReady HealthState = "ready"
)

// Health is the outcome of CheckHealth.
type Health struct {
	State HealthState `json:"state"`
	// Detail is one line in the words of a `docker info` health check, e.g. "docker daemon ready
	// (server 20.10.24)".
	Detail string `json:"detail"`
	// ServerVersion is the engine's version, when it is ready.
	ServerVersion string `json:"server_version,omitempty"`
	// Host is the endpoint asked, when it could be resolved.
	Host string `json:"host,omitempty"`
}

// Ready reports whether the engine answered.
func (h Health) Ready() bool { return h.State == HealthReady }

// Check is the health as a doctor line, engine_health, with a fix when it is not ready.
func (h Health) Check() Check {
	c := Check{Name: "engine_health", Status: Pass, Detail: h.Detail}
	switch h.State {
	case HealthReady:
	case HealthTimedOut:
		c.Status, c.Fix = Fail, "the daemon accepts connections but does not answer: check its log, or restart it"
	default:
		c.Status, c.Fix = Fail, engine.StartHint
	}
	return c
}

// HealthOptions tune CheckHealth. The zero value checks the engine the environment names
// within HealthTimeout.
type HealthOptions struct {
	// Timeout bounds the check (default HealthTimeout).
	Timeout time.Duration
	// Client is asked instead of one resolved from the environment; it is not closed.
	Client client.APIClient
}

// CheckHealth asks the engine for its version within the timeout and reports one of four
// states: missing, timed out, unavailable, or ready with the server version. It never fails
// and never takes much longer than the timeout.
func CheckHealth(ctx context.Context, opts HealthOptions) Health {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = HealthTimeout
	}
	c := opts.Client
	if c == nil {
		var err error
		if c, err = engine.NewClient(); err != nil {
			return Health{State: HealthMissing, Detail: "docker endpoint not found: " + err.Error()}
		}
		defer c.Close()
	}
	h := Health{Host: c.DaemonHost()}
	if u, err := url.Parse(h.Host); err == nil && u.Scheme == "unix" {
		// A missing socket is a missing daemon, not a failing one: say so without dialling.
		if _, err := os.Stat(u.Path); errors.Is(err, fs.ErrNotExist) {
			h.State, h.Detail = HealthMissing, "docker daemon not found: no socket at "+u.Path
			return h
		}
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := c.ServerVersion(hctx)
	switch {
	case err == nil:
		h.State, h.ServerVersion = HealthReady, v.Version
		h.Detail = fmt.Sprintf("docker daemon ready (server %s)", v.Version)
	case ctx.Err() != nil:
		h.State, h.Detail = HealthUnavailable, "docker check interrupted: "+ctx.Err().Error()
	case hctx.Err() != nil:
		h.State, h.Detail = HealthTimedOut, fmt.Sprintf("docker check timed out: no answer from %s within %s", h.Host, timeout)
	default:
		h.State, h.Detail = HealthUnavailable, "docker daemon unavailable: "+err.Error()
	}
	return h
}
