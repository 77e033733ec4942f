package backends

import (
	"context"
	"os"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// ReaperMain runs the watchdog when this process was started as one (orchestrator.WithReaper,
// `--reaper`), and reports whether it was; a program calls it first thing in main, instead of
// orchestrator.ReaperMain, so that its watchdog works on every backend: it rebuilds its
// owner's backend from the owner's description (FromDescription) and removes the dead owner's
// projects through that backend's own listing and Down, on a Kubernetes cluster as on Docker
// engines.
func ReaperMain() bool {
	return tracking.ReaperMainWith(func(_ context.Context, d backend.Description) (backend.Backend, error) {
		return FromDescription(d)
	})
}

// FromDescription builds again, with New, the backend a Description (backend.Describer) says.
// The Endpoint of a Docker description is reached through the environment when DOCKER_HOST
// names it, TLS settings included (the watchdog is started so), else as an endpoint of its own.
func FromDescription(d backend.Description) (backend.Backend, error) {
	if (d.Kind == "" || d.Kind == "docker") && len(d.Engines) == 0 && d.Endpoint != "" && d.Endpoint != os.Getenv("DOCKER_HOST") {
		ep, err := engine.ParseEndpoint(d.Endpoint)
		if err != nil {
			return nil, err
		}
		return dockerbackend.FromEndpoint(ep, dockerbackend.Options{})
	}
	cfg := Config{Kind: d.Kind}
	switch d.Kind {
	case "kubernetes":
		opts, err := kubernetes.OptionsOf(d)
		if err != nil {
			return nil, err
		}
		cfg.Kubernetes = opts
	case "", "docker":
		for _, e := range d.Engines {
			cfg.Engines = append(cfg.Engines, multiengine.EngineConfig{Name: e.Name, Endpoint: e.Endpoint})
		}
	}
	return New(cfg)
}
