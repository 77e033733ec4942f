package lifecycle

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/containerd/errdefs/pkg/errhttp"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/composebox/composebox/cleanup/labels"
)

// RetryPolicy says how lifecycle calls (create, start, stop, remove, inspect and list of
// containers, networks, volumes and images) are retried when the daemon fails transiently. The
// zero value is the default: 5 attempts, 50 ms doubling up to 1 s between them, with jitter.
// Exec, attach and file copies are never retried: they are not idempotent, and a command run
// twice is worse than a command that failed.
type RetryPolicy struct {
	// Attempts is the number of tries in all; 1 turns retries off.
	Attempts int
	// Initial is the delay before the first retry; each later one doubles, up to Max. The
	// actual delay is drawn between half the value and the value, so that calls failed by one
	// daemon hiccup do not all come back at the same instant.
	Initial, Max time.Duration
	// OnRetry, when set, is told of every retry (op is the client method). The orchestrator uses
	// it as a congestion signal to narrow its start ramp.
	OnRetry func(op string, err error)
}

// Default retry policy values.
const (
	DefaultRetryAttempts = 5
	DefaultRetryInitial  = 50 * time.Millisecond
	DefaultRetryMax      = time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = DefaultRetryAttempts
	}
	if p.Initial <= 0 {
		p.Initial = DefaultRetryInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultRetryMax
	}
	p.Max = max(p.Max, p.Initial)
	return p
}

// delay is the pause before retry number n (1 for the first retry).
func (p RetryPolicy) delay(n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	return d/2 + rand.N(d/2+1)
}

// WithRetry sets how the engine retries lifecycle calls (default: the zero RetryPolicy).
func WithRetry(p RetryPolicy) Option { return func(e *Engine) { e.retry = p } }

// Retrying wraps c so that its lifecycle calls are retried on transient daemon errors (see
// IsTransient) with p's backoff, logging each retry at debug level to log (nil: discard).
// Every other method, exec, attach and copies among them, goes straight to c. An error that is
// not transient is returned as c returned it, so errdefs classification is unchanged; when the
// attempts run out or ctx ends during a backoff, the last attempt's error is returned.
//
// Retried creates and removes converge: a create that the daemon carried out but whose answer
// was lost meets a name conflict when retried, and is answered with the existing object when it
// carries the same compose project label; a retried remove that finds nothing has succeeded.
//
// Wrapping an already wrapped client returns it unchanged.
func Retrying(c client.APIClient, p RetryPolicy, log *slog.Logger) client.APIClient {
	if r, ok := c.(*retryClient); ok {
		return r
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &retryClient{APIClient: c, policy: p.withDefaults(), log: log}
}

// IsTransient reports whether err is a daemon failure that may well succeed if the same call
// is made again: the connection reset, refused or cut short (EOF, unexpected EOF, broken pipe),
// a network timeout, HTTP 502, 503 or 504, or a docker errdefs Unavailable error. A cancelled or
// expired context is never transient: the caller gave up.
func IsTransient(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errdefs.IsUnavailable(err),
		errors.Is(err, errhttp.ToNative(http.StatusBadGateway)),
		errors.Is(err, errhttp.ToNative(http.StatusGatewayTimeout)):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return true
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return true
	}
	// The client reports a refused dial, a missing socket and a network timeout as "cannot
	// connect" without keeping the cause; permission and TLS failures are "cannot connect" too
	// but keep theirs, and the permission one will not go away by itself.
	return client.IsErrConnectionFailed(err) && !errors.Is(err, fs.ErrPermission)
}

// retryClient is client.APIClient with its lifecycle methods retried. It embeds the real
// client, so every method it does not override (exec, attach, copies, builds with a streamed
// body) is the real client's.
type retryClient struct {
	client.APIClient
	policy RetryPolicy
	log    *slog.Logger
}

// retry runs call until it succeeds, fails for good, or the attempts or ctx run out. call is
// told whether an earlier attempt was made, so that it can recognise its own earlier success.
func retry[T any](ctx context.Context, r *retryClient, op string, call func(retried bool) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := call(attempt > 1)
		if err == nil || attempt >= r.policy.Attempts || ctx.Err() != nil || !IsTransient(err) {
			return v, err
		}
		d := r.policy.delay(attempt)
		r.log.DebugContext(ctx, "retrying engine call after a transient error", "op", op, "attempt", attempt, "delay", d, "err", err)
		if r.policy.OnRetry != nil {
			r.policy.OnRetry(op, err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// retry0 is retry for calls that return only an error.
func retry0(ctx context.Context, r *retryClient, op string, call func(retried bool) error) error {
	_, err := retry(ctx, r, op, func(retried bool) (struct{}, error) { return struct{}{}, call(retried) })
	return err
}

// removed treats a retried removal that finds nothing as done: the lost attempt removed it.
func removed(err error, retried bool) error {
	if retried && errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *retryClient) ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error) {
	return retry(ctx, r, "ContainerList", func(bool) ([]container.Summary, error) {
		return r.APIClient.ContainerList(ctx, options)
	})
}

func (r *retryClient) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	return retry(ctx, r, "ContainerInspect", func(bool) (container.InspectResponse, error) {
		return r.APIClient.ContainerInspect(ctx, id)
	})
}

type inspectRaw[T any] struct {
	v   T
	raw []byte
}

func (r *retryClient) ContainerInspectWithRaw(ctx context.Context, id string, getSize bool) (container.InspectResponse, []byte, error) {
	res, err := retry(ctx, r, "ContainerInspectWithRaw", func(bool) (inspectRaw[container.InspectResponse], error) {
		v, raw, err := r.APIClient.ContainerInspectWithRaw(ctx, id, getSize)
		return inspectRaw[container.InspectResponse]{v, raw}, err
	})
	return res.v, res.raw, err
}

// ContainerCreate converges: see Retrying.
func (r *retryClient) ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error) {
	return retry(ctx, r, "ContainerCreate", func(retried bool) (container.CreateResponse, error) {
		resp, err := r.APIClient.ContainerCreate(ctx, config, hostConfig, networkingConfig, platform, name)
		if err != nil && retried && name != "" && config != nil && errdefs.IsConflict(err) {
			if info, ierr := r.APIClient.ContainerInspect(ctx, name); ierr == nil && info.Config != nil &&
				sameProject(info.Config.Labels, config.Labels) {
				r.log.DebugContext(ctx, "retried create found the container its lost attempt made", "container", name)
				return container.CreateResponse{ID: info.ID}, nil
			}
		}
		return resp, err
	})
}

// sameProject reports whether an existing object's labels name the same compose project as the
// ones a create asked for.
func sameProject(have, want map[string]string) bool {
	p := want[labels.ComposeProjectLabel]
	return p != "" && have[labels.ComposeProjectLabel] == p
}

func (r *retryClient) ContainerStart(ctx context.Context, id string, options container.StartOptions) error {
	// Idempotent: starting a running container is a 304, which the client reports as success.
	return retry0(ctx, r, "ContainerStart", func(bool) error { return r.APIClient.ContainerStart(ctx, id, options) })
}

func (r *retryClient) ContainerStop(ctx context.Context, id string, options container.StopOptions) error {
	return retry0(ctx, r, "ContainerStop", func(bool) error { return r.APIClient.ContainerStop(ctx, id, options) })
}

func (r *retryClient) ContainerRemove(ctx context.Context, id string, options container.RemoveOptions) error {
	return retry0(ctx, r, "ContainerRemove", func(retried bool) error {
		return removed(r.APIClient.ContainerRemove(ctx, id, options), retried)
	})
}

func (r *retryClient) NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error) {
	return retry(ctx, r, "NetworkList", func(bool) ([]network.Summary, error) {
		return r.APIClient.NetworkList(ctx, options)
	})
}

func (r *retryClient) NetworkInspect(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, error) {
	return retry(ctx, r, "NetworkInspect", func(bool) (network.Inspect, error) {
		return r.APIClient.NetworkInspect(ctx, id, options)
	})
}

func (r *retryClient) NetworkInspectWithRaw(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, []byte, error) {
	res, err := retry(ctx, r, "NetworkInspectWithRaw", func(bool) (inspectRaw[network.Inspect], error) {
		v, raw, err := r.APIClient.NetworkInspectWithRaw(ctx, id, options)
		return inspectRaw[network.Inspect]{v, raw}, err
	})
	return res.v, res.raw, err
}

// NetworkCreate converges: see Retrying. On API < 1.44 the client asks the daemon to refuse a
// duplicate name, which is what makes a lost attempt show up as a conflict.
func (r *retryClient) NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error) {
	return retry(ctx, r, "NetworkCreate", func(retried bool) (network.CreateResponse, error) {
		resp, err := r.APIClient.NetworkCreate(ctx, name, options)
		if err != nil && retried && errdefs.IsConflict(err) {
			// Inspect matches ID prefixes too: check the name.
			if n, ierr := r.APIClient.NetworkInspect(ctx, name, network.InspectOptions{}); ierr == nil && n.Name == name &&
				sameProject(n.Labels, options.Labels) {
				r.log.DebugContext(ctx, "retried create found the network its lost attempt made", "network", name)
				return network.CreateResponse{ID: n.ID}, nil
			}
		}
		return resp, err
	})
}

func (r *retryClient) NetworkRemove(ctx context.Context, id string) error {
	return retry0(ctx, r, "NetworkRemove", func(retried bool) error {
		return removed(r.APIClient.NetworkRemove(ctx, id), retried)
	})
}

func (r *retryClient) VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error) {
	return retry(ctx, r, "VolumeList", func(bool) (volume.ListResponse, error) {
		return r.APIClient.VolumeList(ctx, options)
	})
}

func (r *retryClient) VolumeInspect(ctx context.Context, id string) (volume.Volume, error) {
	return retry(ctx, r, "VolumeInspect", func(bool) (volume.Volume, error) {
		return r.APIClient.VolumeInspect(ctx, id)
	})
}

func (r *retryClient) VolumeInspectWithRaw(ctx context.Context, id string) (volume.Volume, []byte, error) {
	res, err := retry(ctx, r, "VolumeInspectWithRaw", func(bool) (inspectRaw[volume.Volume], error) {
		v, raw, err := r.APIClient.VolumeInspectWithRaw(ctx, id)
		return inspectRaw[volume.Volume]{v, raw}, err
	})
	return res.v, res.raw, err
}

// VolumeCreate needs no convergence: the daemon answers a create of an existing name with the
// existing volume.
func (r *retryClient) VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error) {
	return retry(ctx, r, "VolumeCreate", func(bool) (volume.Volume, error) {
		return r.APIClient.VolumeCreate(ctx, options)
	})
}

func (r *retryClient) VolumeRemove(ctx context.Context, id string, force bool) error {
	return retry0(ctx, r, "VolumeRemove", func(retried bool) error {
		return removed(r.APIClient.VolumeRemove(ctx, id, force), retried)
	})
}

func (r *retryClient) ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error) {
	return retry(ctx, r, "ImageInspect", func(bool) (image.InspectResponse, error) {
		return r.APIClient.ImageInspect(ctx, ref, opts...)
	})
}

func (r *retryClient) ImageInspectWithRaw(ctx context.Context, ref string) (image.InspectResponse, []byte, error) {
	res, err := retry(ctx, r, "ImageInspectWithRaw", func(bool) (inspectRaw[image.InspectResponse], error) {
		//nolint:staticcheck // compose may still call the deprecated method; keep it retried too.
		v, raw, err := r.APIClient.ImageInspectWithRaw(ctx, ref)
		return inspectRaw[image.InspectResponse]{v, raw}, err
	})
	return res.v, res.raw, err
}

func (r *retryClient) ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error) {
	return retry(ctx, r, "ImageList", func(bool) ([]image.Summary, error) {
		return r.APIClient.ImageList(ctx, options)
	})
}
