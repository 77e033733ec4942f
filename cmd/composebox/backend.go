package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// backendEnv selects the backend when --backend is not given.
const backendEnv = "COMPOSEBOX_BACKEND"

// backendFlags choose what runs the samples: the Docker Engine (the default) or a
// Kubernetes cluster.
type backendFlags struct {
	Kind       string
	Kubeconfig string
	Registry   string

	// chosen is the backend setup made for a non-default kind; nil for Docker.
	chosen backend.Backend
}

func addBackendFlags(root *cobra.Command, f *backendFlags) {
	pf := root.PersistentFlags()
	pf.StringVar(&f.Kind, "backend", "", "what runs samples: docker or kubernetes (default $"+backendEnv+", else docker)")
	pf.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, with --backend kubernetes (default $KUBECONFIG, else ~/.kube/config)")
	pf.StringVar(&f.Registry, "registry", "", "host:port of the registry the cluster pulls from and the local engine pushes to, with --backend kubernetes (default $"+kubernetes.EnvRegistry+")")
}

// setup makes the backend the flags name; Docker's is left to the orchestrator.
func (f *backendFlags) setup(g *globals) error {
	kind := f.Kind
	if kind == "" {
		kind = os.Getenv(backendEnv)
	}
	switch kind {
	case "", "docker":
		return nil
	case "kubernetes", "k8s":
		// client-go logs through klog, to stderr unless told otherwise: into composebox's
		// logger instead, so that stderr has one format.
		klog.SetSlogLogger(g.log)
		b, err := kubernetes.New(kubernetes.Options{Kubeconfig: f.Kubeconfig, Registry: f.Registry, Logger: g.log})
		if err != nil {
			return err
		}
		f.chosen = b
		return nil
	}
	return usageError{fmt.Errorf("--backend %q: want docker or kubernetes", kind)}
}

// options are the orchestrator options of the chosen backend, before extra.
func (f *backendFlags) options(extra ...orchestrator.Option) []orchestrator.Option {
	if f.chosen == nil {
		return extra
	}
	return append([]orchestrator.Option{orchestrator.WithBackend(f.chosen)}, extra...)
}
