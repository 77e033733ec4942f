package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backends"
)

// backendEnv selects the backend when --backend is not given.
const backendEnv = "COMPOSEBOX_BACKEND"

// backendFlags choose what runs the samples: the Docker Engine (the default) or a
// Kubernetes cluster.
type backendFlags struct {
	Kind       string
	Kubeconfig string
	Registry   string
	// Engines are --engine NAME=ENDPOINT flags, and EnginesFile an --engines file: several
	// Docker engines that samples spread over.
	Engines     []string
	EnginesFile string

	// chosen is the backend setup made for a non-default kind; nil for Docker.
	chosen backend.Backend
	// engines are the Docker engines Engines and EnginesFile name (none: the environment's).
	engines []backends.EngineConfig
	// docker is the Docker backend (one engine or several), made by the factory the first
	// time a verb asks for an orchestrator, and closed by close.
	docker backend.Backend
}

func addBackendFlags(root *cobra.Command, f *backendFlags) {
	pf := root.PersistentFlags()
	pf.StringVar(&f.Kind, "backend", "", "what runs samples: docker or kubernetes (default $"+backendEnv+", else docker)")
	pf.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, with --backend kubernetes (default $KUBECONFIG, else ~/.kube/config)")
	pf.StringArrayVar(&f.Engines, "engine", nil, "a Docker engine samples spread over, as NAME=ENDPOINT (unix:///PATH, tcp://HOST:PORT?tls=CERTDIR, ssh://USER@HOST or context:NAME); repeat for several (default: the one engine DOCKER_HOST or the docker context names)")
	pf.StringVar(&f.EnginesFile, "engines", "", "YAML file of Docker engines samples spread over: a list `engines` of {name, endpoint, tls, max_samples, labels, subnet_pool}")
	pf.StringVar(&f.Registry, "registry", "", "host:port of the registry the cluster pulls from and the local engine pushes to, with --backend kubernetes (default $"+kubernetes.EnvRegistry+")")
}

// setup makes the backend the flags name; Docker's is made when a verb first needs it (options),
// with the logger in force then, so that a verb that needs no engine makes none.
func (f *backendFlags) setup(g *globals) error {
	kind := f.Kind
	if kind == "" {
		kind = os.Getenv(backendEnv)
	}
	if err := f.setupEngines(); err != nil {
		return err
	}
	if len(f.engines) > 0 && kind != "" && kind != "docker" {
		return usageError{fmt.Errorf("--engine and --engines name Docker engines: not with --backend %s", kind)}
	}
	switch kind {
	case "", "docker":
		return nil
	case "kubernetes", "k8s":
		// client-go logs through klog, to stderr unless told otherwise: into composebox's
		// logger instead, so that stderr has one format.
		klog.SetSlogLogger(g.log)
		b, err := backends.Kubernetes(kubernetes.Options{Kubeconfig: f.Kubeconfig, Registry: f.Registry, Logger: g.log})
		if err != nil {
			return err
		}
		f.chosen = b
		return nil
	}
	return usageError{fmt.Errorf("--backend %q: want docker or kubernetes", kind)}
}

// setupEngines reads --engine and --engines into one list of engines.
func (f *backendFlags) setupEngines() error {
	f.engines = nil
	if f.EnginesFile != "" {
		cfgs, err := backends.LoadEnginesFile(f.EnginesFile)
		if err != nil {
			return usageError{fmt.Errorf("--engines: %w", err)}
		}
		f.engines = cfgs
	}
	for _, s := range f.Engines {
		c, err := backends.ParseEngineFlag(s)
		if err != nil {
			return usageError{fmt.Errorf("--engine: %w", err)}
		}
		f.engines = append(f.engines, c)
	}
	seen := map[string]bool{}
	for _, c := range f.engines {
		if seen[c.Name] {
			return usageError{fmt.Errorf("--engine/--engines: engine %s is named twice", c.Name)}
		}
		seen[c.Name] = true
	}
	return nil
}

// options are the orchestrator options of the chosen backend, before extra: the backend is
// always given (WithBackend), built by the one factory, orchestrator/backends.
func (f *backendFlags) options(g *globals, extra ...orchestrator.Option) ([]orchestrator.Option, error) {
	b := f.chosen
	if b == nil {
		if f.docker == nil {
			sn, err := g.subnets()
			if err != nil {
				return nil, usageError{err}
			}
			d, err := backends.New(backends.Config{Kind: "docker", Engines: f.engines, Subnets: sn, Logger: g.log})
			if err != nil {
				return nil, err
			}
			f.docker = d
		}
		b = f.docker
	}
	return append([]orchestrator.Option{orchestrator.WithBackend(b)}, extra...), nil
}

// close releases the backends the flags made, once the verb is done with them (an
// orchestrator does not close a backend it was given).
func (f *backendFlags) close() {
	for _, b := range []backend.Backend{f.docker, f.chosen} {
		if b != nil {
			_ = b.Close()
		}
	}
	f.docker, f.chosen = nil, nil
}
