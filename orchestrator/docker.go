package orchestrator

import (
	"fmt"
	"net/netip"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/subnets"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/lifecycle/dockerenv"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The one place the orchestrator names Docker: the backend New makes when none is given (the
// Docker Engine the environment names, through lifecycle/dockerenv, which the CLI's factory
// orchestrator/backends calls too), and the deprecated options that configured it. Docker's
// options belong to its backend's constructor: a test (layering_test.go) keeps every other
// file of this package from importing Docker's client or backends.

// dockerOptions are the deprecated Docker options, which configure the default backend.
type dockerOptions struct {
	client  client.APIClient
	subnets Subnets
	engines []EngineConfig
}

// defaultBackend is the Docker backend of the environment (or of the deprecated options).
func defaultBackend(cfg config) (backend.Backend, error) {
	if len(cfg.docker.engines) > 0 && cfg.docker.client != nil {
		return nil, fmt.Errorf("WithEngines does not go with WithClient or WithBackend")
	}
	return dockerenv.New(dockerenv.Config{Logger: cfg.log, Subnets: cfg.docker.subnets, Client: cfg.docker.client, Engines: cfg.docker.engines})
}

// Subnets configures the managed subnets of a Docker backend: every bridge network made for a
// sample gets an explicit small subnet from Pool, because the daemon's default address pools
// hold only about 31 networks on Engine 20.10. The zero value is on, with 10.213.0.0/16 as
// /27s (2048 networks). Its fields are documented on subnets.Subnets, the one home of this
// type.
//
// Deprecated: the orchestrator names no engine: use backends.Subnets (orchestrator/backends).
type Subnets = subnets.Subnets

// WithSubnets configures managed subnets (default: on, 10.213.0.0/16 as /27s) of the Docker
// backend New makes when none is given. It does not apply to a backend given WithBackend.
//
// Deprecated: the orchestrator names no engine: build the backend with its subnets,
// backends.New(backends.Config{Subnets: s}) (orchestrator/backends), and give it WithBackend.
func WithSubnets(s Subnets) Option {
	return func(c *config) error { c.docker.subnets = s; return nil }
}

// WithClient runs samples on the Docker Engine c reaches, instead of the one the environment
// names. The orchestrator does not close a client it was given.
//
// Deprecated: the orchestrator names no engine: use
// WithBackend(dockerbackend.New(c, dockerbackend.Options{Logger: l, Subnets: s})), which
// learns of retries itself (backend.RetryNotifier).
func WithClient(c client.APIClient) Option {
	return func(cfg *config) error { cfg.docker.client = c; return nil }
}

// EngineConfig is one Docker Engine of several (WithEngines): its name, endpoint (unix://,
// tcp:// with TLS certificates, ssh://, or context:NAME), capacity (MaxSamples), labels and
// subnet pool. Its fields are documented on multiengine.EngineConfig, the one home of this type.
//
// Deprecated: the orchestrator names no engine: use backends.EngineConfig
// (orchestrator/backends).
type EngineConfig = multiengine.EngineConfig

// WithEngines spreads samples over several Docker engines. A whole sample lives on one of
// them: the least loaded (live samples over MaxSamples, or over its CPUs when unbounded) of
// those that answer and have room, ties going to one that already has the task's images. The
// task's builds run on each engine that gets its samples, and the images it only names are
// streamed from an engine that has them (no registry is needed). Listings, cleanup, the reaper
// and warm pools span every engine, and what they report names the engine. An engine that is
// down or full is skipped; SampleInit fails, with a *PlacementError saying why for each
// engine, only when none can take the sample. Each engine gets an equal share of the managed
// subnet pool unless its SubnetPool says otherwise. Not with WithClient or WithBackend.
//
// Deprecated: the orchestrator names no engine: build the backend of several engines,
// backends.New(backends.Config{Engines: engines}) (orchestrator/backends), and give it
// WithBackend.
func WithEngines(engines ...EngineConfig) Option {
	return func(c *config) error {
		if len(engines) == 0 {
			return fmt.Errorf("with engines: none given")
		}
		for _, e := range engines {
			if err := e.Validate(); err != nil {
				return fmt.Errorf("with engines: %w", err)
			}
		}
		c.docker.engines = append(c.docker.engines, engines...)
		return nil
	}
}

// ParseSubnetPool checks a managed-subnet pool and the size of each sample's subnet, and
// returns the pool's base.
//
// Deprecated: the orchestrator names no engine: use backends.ParseSubnetPool
// (orchestrator/backends).
func ParseSubnetPool(pool string, bits int) (netip.Prefix, error) {
	p, err := subnets.Parse(pool, bits)
	return p.Base, err
}

// Client is the Engine API client of a Docker backend, nil for any other backend.
//
// Deprecated: the orchestrator names no engine: ask the Docker backend,
// o.Backend().(*dockerbackend.Backend).Client().
func (o *Orchestrator) Client() client.APIClient {
	if d, ok := o.backend.(*dockerbackend.Backend); ok {
		return d.Client()
	}
	return nil
}
