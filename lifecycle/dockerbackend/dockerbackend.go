// Package dockerbackend is the Docker implementation of the orchestrator's backend boundary
// (orchestrator/backend): one Docker Engine, reached through one Engine API client. It is a
// thin adapter: projects go through lifecycle (the embedded compose library), teardown,
// inventory and markers through cleanup and cleanup/tracking, the engine's fitness through
// prereqs, and sandbox I/O through lifecycle/sandboxio. It translates between the boundary's
// neutral types and the Engine API's.
package dockerbackend

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/client"
	dockererrdefs "github.com/docker/docker/errdefs"

	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/prereqs"
)

// Backend is one Docker Engine behind the backend boundary. It is safe for concurrent use.
type Backend struct {
	// raw is the client as given: exec, attach and copies go through it, never retried.
	raw client.APIClient
	// engine drives compose projects over the retrying client.
	engine *lifecycle.Engine
	// owned says Close closes raw (a client New made itself).
	owned bool
	// fromEnv says raw is the engine the environment names.
	fromEnv bool
	// name names the engine in listings; shell is the docker CLI's prefix that reaches it.
	name, shell string
	onRetry     atomic.Pointer[func(op string, err error)]
	log         *slog.Logger
	// transportChecked is set once the first ping looked at how the engine is reached (over
	// plain tcp:// is a warning).
	transportChecked atomic.Bool
}

var (
	_ backend.Backend       = (*Backend)(nil)
	_ backend.RetryNotifier = (*Backend)(nil)
)

// Options configures a Backend. The zero value is the default.
type Options struct {
	// Logger receives the engine's diagnostics (default: discarded).
	Logger *slog.Logger
	// Retry says how lifecycle calls ride out the daemon's hiccups.
	Retry lifecycle.RetryPolicy
	// Subnets configures managed subnets for the networks of samples.
	Subnets lifecycle.Subnets
	// Name names the engine in listings (Project.Engine, Container.Engine); default
	// backend.DefaultEngine.
	Name string
	// Shell is how the docker CLI reaches the engine, put before `exec` in ShellCommand:
	// "-H tcp://host:2376", "--context NAME" ("": the CLI's own default).
	Shell string
	// EgressBinary is the static composebox binary the egress gateway's image holds (""
	// is this process's executable; see lifecycle.WithEgressBinary).
	EgressBinary string
}

// New returns a Backend over c, which it does not close.
func New(c client.APIClient, opts Options) (*Backend, error) {
	b := &Backend{raw: c, name: cmp.Or(opts.Name, backend.DefaultEngine), shell: opts.Shell, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))}
	retry := opts.Retry
	next := retry.OnRetry
	retry.OnRetry = func(op string, err error) {
		if next != nil {
			next(op, err)
		}
		if fn := b.onRetry.Load(); fn != nil {
			(*fn)(op, err)
		}
	}
	lopts := []lifecycle.Option{lifecycle.WithRetry(retry), lifecycle.WithSubnets(opts.Subnets)}
	if opts.Logger != nil {
		lopts = append(lopts, lifecycle.WithLogger(opts.Logger))
	}
	if opts.EgressBinary != "" {
		lopts = append(lopts, lifecycle.WithEgressBinary(opts.EgressBinary))
	}
	e, err := lifecycle.New(c, lopts...)
	if err != nil {
		return nil, err
	}
	b.engine = e
	return b, nil
}

// FromEnv returns a Backend over a client resolved from the environment (DOCKER_HOST, the
// current docker context), which Close closes.
func FromEnv(opts Options) (*Backend, error) {
	c, err := engine.NewClient()
	if err != nil {
		return nil, err
	}
	b, err := New(c, opts)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	b.owned, b.fromEnv = true, true
	return b, nil
}

// FromEndpoint returns a Backend over a client of ep, which Close closes. Its name is
// opts.Name, and the docker CLI reaches it with the endpoint's own flags.
func FromEndpoint(ep engine.Endpoint, opts Options) (*Backend, error) {
	c, err := ep.Client()
	if err != nil {
		return nil, err
	}
	if opts.Shell == "" {
		opts.Shell = shellFlags(ep)
	}
	b, err := New(c, opts)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	b.owned = true
	return b, nil
}

// shellFlags are the docker CLI's flags that reach ep.
func shellFlags(ep engine.Endpoint) string {
	switch {
	case ep.Context != "":
		return "--context " + ep.Context
	case ep.TLSDir != "":
		return fmt.Sprintf("-H %s --tlsverify --tlscacert %[2]s/ca.pem --tlscert %[2]s/cert.pem --tlskey %[2]s/key.pem", ep.Host, ep.TLSDir)
	}
	return "-H " + ep.Host
}

// Name names the engine in listings.
func (b *Backend) Name() string { return b.name }

// Client is the Engine API client the backend was made with.
func (b *Backend) Client() client.APIClient { return b.raw }

// Engine is the lifecycle engine the backend drives projects with.
func (b *Backend) Engine() *lifecycle.Engine { return b.engine }

// OnRetry tells fn of every retried engine call.
func (b *Backend) OnRetry(fn func(op string, err error)) { b.onRetry.Store(&fn) }

// Kind is "docker".
func (b *Backend) Kind() string { return "docker" }

// Capabilities: the watchdog of WithReaper is a Docker client, which sees this engine.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{HostReaper: true}
}

// The Docker backend does every optional verb composebox has.
var (
	_ backend.Backend        = (*Backend)(nil)
	_ backend.Capable        = (*Backend)(nil)
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
	_ backend.EngineNamer    = (*Backend)(nil)
	_ backend.Forker         = (*Backend)(nil)
	_ backend.Egress         = (*Backend)(nil)
	_ backend.SweepFinisher  = (*Backend)(nil)
	_ backend.RetryNotifier  = (*Backend)(nil)
)

// Endpoint is the daemon's address.
func (b *Backend) Endpoint() string { return b.raw.DaemonHost() }

// Close releases the engine, and the client when the backend made it.
func (b *Backend) Close() error {
	err := b.engine.Close()
	if b.owned {
		if cerr := b.raw.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Ping checks the daemon answers within timeout, its API version and its storage driver.
// An engine reached over tcp:// without TLS is said once, as a warning on the logger.
func (b *Backend) Ping(ctx context.Context, timeout time.Duration) (backend.Info, error) {
	info, err := prereqs.Require(ctx, b.raw, timeout)
	if err == nil && b.transportChecked.CompareAndSwap(false, true) && engine.PlainTCP(ctx, b.raw, timeout) {
		b.log.Warn("engine "+engine.PlainTCPRisk, "engine", b.name, "host", info.Host, "fix", engine.PlainTCPFix)
	}
	return backend.Info{Endpoint: info.Host, APIVersion: info.APIVersion, OSType: info.OSType, MemTotal: info.MemTotal, NCPU: info.NCPU}, err
}

// Doctor runs prereqs.Doctor against the backend's engine.
func (b *Backend) Doctor(ctx context.Context, opts backend.DoctorOptions) backend.Report {
	var c client.APIClient
	if !b.fromEnv {
		c = b.raw
	}
	return prereqs.Doctor(ctx, prereqs.Options{Client: c,
		PingTimeout: opts.PingTimeout, Busybox: opts.Busybox, Extra: opts.Extra, HostAccess: opts.HostAccess,
		Subnets: prereqs.SubnetOptions{Disabled: b.engine.Subnets().Disabled, Pool: b.engine.Subnets().Pool, Bits: b.engine.Subnets().Bits},
	})
}

// Transient is lifecycle.IsTransient: a reset connection, an overloaded daemon.
func (b *Backend) Transient(err error) bool { return lifecycle.IsTransient(err) }

// Unreachable reports an error of the Engine API client that could not reach the daemon. The
// compose library flattens some of its client's errors into text, so the client's own message
// for a failed dial is recognised too.
func (b *Backend) Unreachable(err error) bool {
	return err != nil && (client.IsErrConnectionFailed(err) || strings.Contains(err.Error(), "Cannot connect to the Docker daemon"))
}

// BaseImage builds composebox's base image unless it exists.
func (b *Backend) BaseImage(ctx context.Context) (string, error) { return b.engine.Images().Base(ctx) }

// Image inspects ref; an absent image is ErrNotFound.
func (b *Backend) Image(ctx context.Context, ref string) (backend.ImageInfo, error) {
	img, err := b.engine.Client().ImageInspect(ctx, ref)
	switch {
	case dockererrdefs.IsNotFound(err):
		return backend.ImageInfo{}, errdefs.Wrap(errdefs.ErrNotFound, err, "image "+ref)
	case err != nil:
		return backend.ImageInfo{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	info := backend.ImageInfo{ID: img.ID}
	if img.Config != nil {
		info.Labels = img.Config.Labels
	}
	return info, nil
}

// Build is lifecycle's Build.
func (b *Backend) Build(ctx context.Context, svc types.ServiceConfig, opts backend.BuildOptions) (bool, error) {
	return b.engine.Build(ctx, svc, lifecycle.BuildOptions{Tag: opts.Tag, Labels: opts.Labels, Limit: opts.Limit,
		HostAccess: opts.HostAccess, Roots: opts.Roots, AllowAddURL: opts.AllowAddURL})
}

// SaveImages streams refs as one `docker save` archive.
func (b *Backend) SaveImages(ctx context.Context, refs []string, w io.Writer) error {
	rc, err := b.raw.ImageSave(ctx, refs)
	if err != nil {
		return fmt.Errorf("save images %s: %w", strings.Join(refs, ", "), err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("save images %s: %w", strings.Join(refs, ", "), err)
	}
	return nil
}

// LoadImages loads a `docker save` archive.
func (b *Backend) LoadImages(ctx context.Context, r io.Reader) error {
	resp, err := b.raw.ImageLoad(ctx, r)
	if err != nil {
		return fmt.Errorf("load images: %w", err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// notFound turns the engine's not-found into composebox's.
func notFound(err error, what string) error {
	if dockererrdefs.IsNotFound(err) {
		return errdefs.Wrap(errdefs.ErrNotFound, err, what)
	}
	return err
}
