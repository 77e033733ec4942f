// Package backends builds a backend by name: the one factory the CLI, the server and the
// benchmarks go through, so that none of them wires a backend's parts together itself. Each
// backend's own options live here, not on the orchestrator: Docker's subnets and engines
// (Config.Subnets, Config.Engines; built by lifecycle/dockerenv, as the orchestrator's default
// is) and the cluster of a Kubernetes backend; the result is given to orchestrator.WithBackend. It sits
// apart from orchestrator because a Kubernetes backend links client-go, which a library user
// running on Docker alone should not pay for.
package backends

import (
	"log/slog"
	"net/netip"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/subnets"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/lifecycle/dockerenv"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Subnets configures the managed subnets of a Docker backend: every bridge network made for a
// sample gets an explicit small subnet from Pool, because the daemon's default address pools
// hold only about 31 networks on Engine 20.10. The zero value is on, with 10.213.0.0/16 as
// /27s (2048 networks). Its fields are documented on subnets.Subnets, the one home of this
// type.
type Subnets = subnets.Subnets

// ParseSubnetPool checks a managed-subnet pool and the size of each sample's subnet, and
// returns the pool's base.
func ParseSubnetPool(pool string, bits int) (netip.Prefix, error) {
	p, err := subnets.Parse(pool, bits)
	return p.Base, err
}

// EngineConfig is one Docker Engine of several (Config.Engines): its name, endpoint (unix://,
// tcp:// with TLS certificates, ssh://, or context:NAME), capacity (MaxSamples), labels and
// subnet pool. Its fields are documented on multiengine.EngineConfig, the one home of this type.
type EngineConfig = multiengine.EngineConfig

// ParseEngineFlag reads an engine given as NAME=ENDPOINT (the CLI's --engine).
func ParseEngineFlag(s string) (EngineConfig, error) { return multiengine.ParseFlag(s) }

// LoadEnginesFile reads a YAML file of engines: a list `engines` of {name, endpoint, tls,
// max_samples, labels, subnet_pool} (the CLI's --engines).
func LoadEnginesFile(path string) ([]EngineConfig, error) { return multiengine.LoadFile(path) }

// Config names the backend to build. The zero value is Docker, from the environment.
type Config struct {
	// Kind is "docker" (or "") or "kubernetes" (or "k8s").
	Kind string
	// Kubernetes configures a Kubernetes backend; its Images and Docker are filled from the
	// environment's Docker Engine when nil.
	Kubernetes kubernetes.Options
	// Engines, for Docker, are several engines samples spread over (multiengine); none is the
	// one engine the environment names. A whole sample lives on one of them: the least loaded
	// of those that answer and have room, ties going to one that already has the task's
	// images; SampleInit fails with a *backend.PlacementError only when none can take it.
	Engines []EngineConfig
	// Subnets, for Docker, configures managed subnets (default: on, 10.213.0.0/16 as /27s);
	// over several engines, each gets an equal share unless its SubnetPool says otherwise.
	Subnets Subnets
	Logger  *slog.Logger
}

// New builds the backend cfg names.
func New(cfg Config) (backend.Backend, error) {
	switch cfg.Kind {
	case "", "docker":
		return dockerenv.New(dockerenv.Config{Logger: cfg.Logger, Subnets: cfg.Subnets, Engines: cfg.Engines})
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
