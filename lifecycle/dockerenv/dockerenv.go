// Package dockerenv builds the Docker backend from Docker's own options: the one engine the
// environment names (DOCKER_HOST, the current docker context) or a client of one's own, or
// several engines that samples spread over (lifecycle/multiengine), each with its managed
// subnets. It is the one place that does: orchestrator.New, for an orchestrator given no
// backend, and orchestrator/backends, the factory of the CLI and the server, both call New, so
// that the orchestrator's public API names no engine and its options hold none of Docker's.
package dockerenv

import (
	"log/slog"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/subnets"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Config is the Docker backend to build. The zero value is the environment's engine, with
// managed subnets on (10.213.0.0/16 as /27s).
type Config struct {
	// Logger receives the engines' diagnostics (default: discarded).
	Logger *slog.Logger
	// Subnets configures managed subnets; over several engines its pool is split in equal
	// shares among those that give no pool of their own.
	Subnets subnets.Subnets
	// Client is the engine to run samples on instead of the environment's; the backend does
	// not close it. Not with Engines.
	Client client.APIClient
	// Engines are several engines samples spread over; none is one engine.
	Engines []multiengine.EngineConfig
}

// New builds the backend cfg describes, which its Close releases (a Client given stays open).
// It does not contact any engine: the backend's Ping does.
func New(cfg Config) (backend.Backend, error) {
	if len(cfg.Engines) > 0 {
		if cfg.Client != nil {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, "docker backend: a client and several engines: give one or the other")
		}
		b, err := multiengine.New(cfg.Engines, multiengine.Config{Logger: cfg.Logger, Subnets: cfg.Subnets})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	opts := dockerbackend.Options{Logger: cfg.Logger, Subnets: cfg.Subnets}
	var b *dockerbackend.Backend
	var err error
	if cfg.Client != nil {
		b, err = dockerbackend.New(cfg.Client, opts)
	} else {
		b, err = dockerbackend.FromEnv(opts)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}
