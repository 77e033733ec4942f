// Package backends builds a backend by name: the one factory the CLI, the server and the
// benchmarks go through, so that none of them wires a backend's parts together itself. It sits
// apart from orchestrator because a Kubernetes backend links client-go, which a library user
// running on Docker alone should not pay for.
package backends

import (
	"log/slog"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Config names the backend to build. The zero value is Docker, from the environment.
type Config struct {
	// Kind is "docker" (or "") or "kubernetes" (or "k8s").
	Kind string
	// Kubernetes configures a Kubernetes backend; its Images and Docker are filled from the
	// environment's Docker Engine when nil.
	Kubernetes kubernetes.Options
	// Engines, for Docker, are several engines samples spread over (multiengine); none is the
	// one engine the environment names.
	Engines []multiengine.EngineConfig
	Logger  *slog.Logger
}

// New builds the backend cfg names.
func New(cfg Config) (backend.Backend, error) {
	switch cfg.Kind {
	case "", "docker":
		if len(cfg.Engines) > 0 {
			return multiengine.New(cfg.Engines, multiengine.Config{Logger: cfg.Logger})
		}
		return dockerbackend.FromEnv(dockerbackend.Options{Logger: cfg.Logger})
	case "kubernetes", "k8s":
		if cfg.Kubernetes.Logger == nil {
			cfg.Kubernetes.Logger = cfg.Logger
		}
		return Kubernetes(cfg.Kubernetes)
	}
	return nil, errdefs.New(errdefs.ErrInvalidConfig, "backend "+cfg.Kind+": want docker or kubernetes")
}

// Kubernetes is kubernetes.New with the images built and pushed by the Docker backend over
// opts.Docker (else the environment's engine), when opts.Images is nil.
func Kubernetes(opts kubernetes.Options) (*kubernetes.Backend, error) {
	made := opts.Images == nil
	if made {
		var imgs *dockerbackend.Backend
		var err error
		if opts.Docker != nil {
			imgs, err = dockerbackend.New(opts.Docker, dockerbackend.Options{Logger: opts.Logger})
		} else {
			imgs, err = dockerbackend.FromEnv(dockerbackend.Options{Logger: opts.Logger})
		}
		if err != nil {
			return nil, err
		}
		opts.Images, opts.Docker = imgs, imgs.Client()
	}
	b, err := kubernetes.New(opts)
	if err != nil && made {
		_ = opts.Images.Close()
	}
	return b, err
}
