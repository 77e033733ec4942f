package backend

// Description says how to make a backend again in another process: the reaper's watchdog is
// this program re-executed, and it rebuilds its owner's backend from a Description (through
// the one factory, orchestrator/backends) to remove the owner's projects through this
// package's verbs, whatever runs them. It holds names and paths, never credentials: the
// watchdog reads those where its owner did (a kubeconfig file, the Docker environment).
type Description struct {
	// Kind is the backend's Kind ("docker", "kubernetes").
	Kind string `json:"kind"`
	// Endpoint is, for one Docker engine given explicitly, its daemon host; "" is the engine
	// the environment names.
	Endpoint string `json:"endpoint,omitempty"`
	// Engines are, for samples spread over several Docker engines, each engine.
	Engines []DescribedEngine `json:"engines,omitempty"`
	// Settings are the backend's own options, named and read by its package (the kubeconfig
	// path and the registry of a Kubernetes backend, say).
	Settings map[string]string `json:"settings,omitempty"`
	// HostReaper is the backend's Capabilities().HostReaper: a watchdog that knows Docker
	// engines alone can remove its samples.
	HostReaper bool `json:"host_reaper,omitempty"`
}

// DescribedEngine is one engine of several: its name and its endpoint (unix:///PATH,
// tcp://HOST:PORT?tls=CERTDIR, ssh://..., context:NAME).
type DescribedEngine struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
}

// Describer is a backend that can say how to make itself again in another process. A backend
// that is not one is described by its Kind alone, from the environment.
type Describer interface {
	Describe() (Description, error)
}
