// Package kubernetes is the Kubernetes implementation of the orchestrator's backend boundary
// (orchestrator/backend), over client-go. A sample is a namespace named as its project and
// labelled with composebox's labels; each service is one bare pod (no controller, so nothing
// restarts a sample behind the agent's back) and a headless Service per name it answers to, so
// that short names resolve through the namespace's DNS search path as they do on a compose
// network. Images come from a registry the cluster pulls from; a local Docker Engine builds
// them and pushes what the registry lacks. Execs and file operations run over the exec
// subresource (WebSocket, falling back to SPDY).
//
// Compose's semantics map onto the cluster as docs/kubernetes.md describes: depends_on as
// dependency waves (depends.go), networks as NetworkPolicies (netpol.go), named volumes as
// claims and binds as copies (volumes.go, binds.go), limits and reservations as resources
// (resources.go). Markers and atomic claims (markers.go) and the death watch (deaths.go) work
// as on Docker. Selection, the sweep and the `ls` summary are the contract's (backend.Plan,
// backend.Sweep, backend.Summary); building images is the Docker backend's, passed in as
// Options.Images, so that this package depends on the contract alone. What does not map
// (publishing ports on a host, user switching by name, host paths outside the task directory)
// fails with a typed error saying so.
package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/client"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Environment variables that configure the backend when the options leave them empty.
const (
	EnvRegistry = "COMPOSEBOX_REGISTRY"
	// EnvDNS lists, comma-separated, the cluster DNS servers that run outside any pod.
	EnvDNS = "COMPOSEBOX_K8S_DNS"
	// EnvVolumeRoot is the node directory that holds the volumes several services of a sample
	// share, on a cluster without a StorageClass.
	EnvVolumeRoot = "COMPOSEBOX_K8S_VOLUMES"
)

// ErrNotSupported is what a verb that does not map onto Kubernetes yet fails with (together
// with ErrPrerequisite).
var ErrNotSupported = errors.New("not supported on kubernetes yet")

// Options configures a Backend. The zero value reads $KUBECONFIG (else ~/.kube/config) and
// $COMPOSEBOX_REGISTRY, and builds and pushes with the Docker Engine the environment names.
type Options struct {
	// Kubeconfig is the kubeconfig file; "" is $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	// Config, when set, is used instead of Kubeconfig.
	Config *rest.Config
	// Registry is host[:port] of the registry the cluster pulls samples' images from and the
	// local Docker Engine pushes to; "" is $COMPOSEBOX_REGISTRY.
	Registry string
	// Docker is the engine that builds images and pushes them; nil is the one the environment
	// names (closed by Close).
	Docker client.APIClient
	// Images builds the samples' images on Docker and brings them from elsewhere: the Docker
	// backend over Docker (dockerbackend.New), passed in so that this backend depends on the
	// contract alone. Required; Close closes it.
	Images Images
	// Logger receives diagnostics (default: discarded).
	Logger *slog.Logger
	// StartTimeout bounds a sample's readiness when the healthchecks give no budget
	// (default 2 minutes).
	StartTimeout time.Duration
	// StorageClass is the class of the claims named volumes become; "" is the cluster's
	// default class. Without one, a volume one service mounts is an emptyDir, and one
	// several services share a directory under VolumeRoot.
	StorageClass string
	// VolumeRoot is, on a cluster without a StorageClass, the directory on the node (absolute)
	// under which the volumes several services of a sample share live, one directory per
	// sample. The node's operator makes it a directory only root can traverse (0700, owned by
	// root), on a mount with nosuid and nodev, as `make k8s` does; "" is
	// $COMPOSEBOX_K8S_VOLUMES, and without either such a volume fails prerequisite.
	VolumeRoot string
	// DNS are the addresses of cluster DNS servers that run outside any pod (a resolver on
	// the node), which a service cut off from egress may still query; "" is $COMPOSEBOX_K8S_DNS.
	// kube-dns's pods in kube-system are allowed in any case.
	DNS []string
}

// Images is what this backend needs of the engine that builds its images.
type Images interface {
	BaseImage(ctx context.Context) (string, error)
	Build(ctx context.Context, svc types.ServiceConfig, opts backend.BuildOptions) (bool, error)
	SaveImages(ctx context.Context, refs []string, w io.Writer) error
	LoadImages(ctx context.Context, r io.Reader) error
	Close() error
}

// Backend runs samples on one Kubernetes cluster. It is safe for concurrent use.
type Backend struct {
	cfg      *rest.Config
	cs       k8s.Interface
	registry string
	docker   client.APIClient
	images   Images
	owned    bool
	log      *slog.Logger
	start    time.Duration
	// storageClass, volumeRoot and dns are Options.StorageClass, Options.VolumeRoot and
	// Options.DNS.
	storageClass string
	volumeRoot   string
	dns          []netip.Addr
	// kubeconfig is the kubeconfig file the backend was made from ("" when made from a
	// rest.Config), for Describe.
	kubeconfig string
	// dead holds the containers (namespace/pod) found dead: see knownDead.
	dead sync.Map
	// egress caches what the network policies confine samples from (egress.go).
	egress egressCache
}

// What a cluster does beyond the required contract. It declares no Capabilities: the
// watchdog of WithReaper is a Docker client, which sees no pod.
var (
	_ backend.Backend        = (*Backend)(nil)
	_ backend.Classifier     = (*Backend)(nil)
	_ backend.Doctor         = (*Backend)(nil)
	_ backend.ImageMover     = (*Backend)(nil)
	_ backend.Pruner         = (*Backend)(nil)
	_ backend.Pooler         = (*Backend)(nil)
	_ backend.Detacher       = (*Backend)(nil)
	_ backend.Owners         = (*Backend)(nil)
	_ backend.DetachedExecer = (*Backend)(nil)
	_ backend.Diagnoser      = (*Backend)(nil)
	_ backend.Shell          = (*Backend)(nil)
	_ backend.FileBuffers    = (*Backend)(nil)
	_ backend.Explainer      = (*Backend)(nil)
)

// New connects to the cluster opts names. Nothing is contacted until the first call.
func New(opts Options) (*Backend, error) {
	cfg := opts.Config
	kubeconfig := ""
	if cfg == nil {
		path, err := KubeconfigPath(opts.Kubeconfig)
		if err != nil {
			return nil, err
		}
		// Absolute, so that a watchdog rebuilding this backend elsewhere (Describe) reads the same file.
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		kubeconfig = path
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "kubernetes: load kubeconfig "+path)
		}
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "kubernetes: client")
	}
	reg := opts.Registry
	if reg == "" {
		reg = os.Getenv(EnvRegistry)
	}
	if reg == "" {
		return nil, errdefs.New(errdefs.ErrPrerequisite, "kubernetes: no registry: set --registry or "+EnvRegistry+" to the host:port the cluster pulls images from")
	}
	dns, err := dnsAddrs(opts.DNS)
	if err != nil {
		return nil, err
	}
	root := cmp.Or(opts.VolumeRoot, os.Getenv(EnvVolumeRoot))
	if root != "" && (!path.IsAbs(root) || path.Clean(root) != root || root == "/") {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, "kubernetes: volume root "+root+": not a clean absolute directory (set "+EnvVolumeRoot+")")
	}
	b := &Backend{cfg: cfg, cs: cs, registry: reg, docker: opts.Docker, log: opts.Logger, start: opts.StartTimeout,
		storageClass: opts.StorageClass, volumeRoot: root, dns: dns, kubeconfig: kubeconfig}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.start <= 0 {
		b.start = 2 * time.Minute
	}
	if b.docker == nil {
		c, err := engine.NewClient()
		if err != nil {
			return nil, err
		}
		b.docker, b.owned = c, true
	}
	if opts.Images == nil {
		b.Close()
		return nil, errdefs.New(errdefs.ErrPrerequisite, "kubernetes: no image builder: Options.Images is the Docker backend that builds and pushes the samples' images")
	}
	b.images = opts.Images
	return b, nil
}

// dnsAddrs parses the DNS servers given, else those of $COMPOSEBOX_K8S_DNS.
func dnsAddrs(given []string) ([]netip.Addr, error) {
	if len(given) == 0 {
		if env := os.Getenv(EnvDNS); env != "" {
			given = strings.Split(env, ",")
		}
	}
	var out []netip.Addr
	for _, s := range given {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "kubernetes: DNS server "+s+" (set "+EnvDNS+" to IP addresses)")
		}
		out = append(out, a)
	}
	return out, nil
}

// KubeconfigPath is path, else $KUBECONFIG (its first entry), else ~/.kube/config.
func KubeconfigPath(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return filepath.SplitList(env)[0], nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", errdefs.Wrap(errdefs.ErrPrerequisite, err, "kubernetes: no kubeconfig: set --kubeconfig or KUBECONFIG")
	}
	return filepath.Join(home, ".kube", "config"), nil
}

// Clientset is the client the backend talks to the cluster with.
func (b *Backend) Clientset() k8s.Interface { return b.cs }

// Registry is the registry images are pulled from.
func (b *Backend) Registry() string { return b.registry }

// Kind is "kubernetes".
func (b *Backend) Kind() string { return "kubernetes" }

// Endpoint is the API server's address.
func (b *Backend) Endpoint() string { return b.cfg.Host }

// Close releases the Docker client the backend made.
func (b *Backend) Close() error {
	var err error
	if b.images != nil {
		err = b.images.Close()
	}
	if b.owned {
		if cerr := b.docker.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Ping checks the API server answers and the backend may work with namespaces.
func (b *Backend) Ping(ctx context.Context, timeout time.Duration) (backend.Info, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := b.cs.Discovery().ServerVersion()
	if err != nil {
		return backend.Info{}, errdefs.Wrap(errdefs.ErrPrerequisite, err, "kubernetes: reach the API server at "+b.cfg.Host)
	}
	info := backend.Info{Endpoint: b.cfg.Host, APIVersion: v.GitVersion, OSType: "linux"}
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, listOpts(""))
	if err == nil {
		for _, n := range nodes.Items {
			if m, ok := n.Status.Allocatable.Memory().AsInt64(); ok {
				info.MemTotal += m
			}
		}
	}
	return info, nil
}

// Doctor reports the API server's reachability and the registry's.
func (b *Backend) Doctor(ctx context.Context, opts backend.DoctorOptions) backend.Report {
	rep := backend.Report{OK: true}
	add := func(c backend.Check) {
		if c.Status == backend.Fail {
			rep.OK = false
		}
		rep.Checks = append(rep.Checks, c)
	}
	if info, err := b.Ping(ctx, opts.PingTimeout); err != nil {
		add(backend.Check{Name: "kubernetes", Status: backend.Fail, Detail: err.Error(), Fix: "check --kubeconfig / KUBECONFIG"})
	} else {
		add(backend.Check{Name: "kubernetes", Status: backend.Pass, Detail: "API server " + info.Endpoint + " answers, " + info.APIVersion})
	}
	if err := b.registryPing(ctx); err != nil {
		add(backend.Check{Name: "registry", Status: backend.Fail, Detail: err.Error(), Fix: "check --registry / " + EnvRegistry})
	} else {
		add(backend.Check{Name: "registry", Status: backend.Pass, Detail: b.registry + " answers"})
	}
	for _, c := range opts.Extra {
		add(c)
	}
	return rep
}

// Transient reports the API server's passing trouble: throttling, timeouts, a reset connection.
func (b *Backend) Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}

// Unreachable reports an API server that could not be dialled.
func (b *Backend) Unreachable(err error) bool {
	var op *net.OpError
	return err != nil && errors.As(err, &op) && op.Op == "dial"
}

func notSupported(what string) error {
	return errdefs.Wrap(errdefs.ErrPrerequisite, ErrNotSupported, "kubernetes: "+what)
}
