// Package orchestrator is composebox's public API. TaskInit resolves, polices and builds a
// task's compose project once; SampleInit gives every sample its own live, isolated copy of it,
// with one Sandbox per service (the default one first); Sample.Cleanup and Task.Cleanup tear
// them down without leaving a container, network or volume behind.
//
// The library is silent: it logs to the *slog.Logger given with WithLogger (default: discard)
// and reports progress as Events to the observer given with WithObserver.
package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/cpus"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Orchestrator runs tasks and their samples on one backend: the one given WithBackend, else
// the Docker Engine the environment names (docker.go). It is safe for concurrent use. Close releases the backend it made.
type Orchestrator struct {
	cfg     config
	backend backend.Backend
	// pooler is the backend's warm pool markers, nil when it has none (no task can then
	// keep a warm pool).
	pooler backend.Pooler
	// ownsBackend: the backend was made by New (not given with WithBackend), so Close closes it.
	ownsBackend bool
	owner       string
	// limits are the concurrency limits in force; builds, starts, teardowns and execs enforce
	// them, one gate per class of operation (limits.go; nil is unbounded).
	limits                           Limits
	builds, starts, teardowns, execs *gate

	prereqMu   sync.Mutex
	prereqInfo *backend.Info

	// pools are the tasks whose warm pool runs, which Close ends.
	poolsMu sync.Mutex
	pools   map[*Task]bool
}

type config struct {
	log      *slog.Logger
	observer Observer
	// observed: an observer was given, so per-service progress is worth collecting.
	observed     bool
	stateDir     string
	policy       compose.Policy
	defaultImage string
	limits       Limits
	backend      backend.Backend
	pingTimeout  time.Duration
	// reaper starts a watchdog process that removes this process's samples if it dies
	// without cleaning up (see tracking.go).
	reaper bool
	// sweepStale removes stale projects of a task's name at TaskInit.
	sweepStale bool
	// docker are the deprecated Docker options (docker.go), for the default backend.
	docker dockerOptions
}

// Option configures an Orchestrator.
type Option func(*config) error

// WithLogger sends diagnostics to l. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// WithObserver receives every lifecycle Event. It is called synchronously from the goroutine
// doing the work, so it must be quick.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o != nil {
			c.observer, c.observed = o, true
		}
		return nil
	}
}

// WithStateDir sets where composebox keeps its state cache (default: $XDG_DATA_HOME/composebox,
// else ~/.local/share/composebox). The engine's labels stay the source of truth.
func WithStateDir(dir string) Option {
	return func(c *config) error {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("state dir %s: %w", dir, err)
		}
		c.stateDir = abs
		return nil
	}
}

// WithPolicy sets the security policy every task's project must pass (default:
// compose.DefaultPolicy()).
func WithPolicy(p compose.Policy) Option {
	return func(c *config) error { c.policy = p; return nil }
}

// WithDefaultImage sets the image of tasks that give no config at all (default: the base image
// composebox builds itself).
func WithDefaultImage(ref string) Option {
	return func(c *config) error { c.defaultImage = ref; return nil }
}

// WithMaxConcurrentSamples bounds how many SampleInits create, start and wait for their
// samples at once (Limits.Starts; default: 2 × CPUs, reached by a ramp).
func WithMaxConcurrentSamples(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("max concurrent samples %d: must be at least 1", n)
		}
		c.limits.Starts = n
		return nil
	}
}

// WithBackend runs samples on b (see orchestrator/backend) instead of the Docker Engine the
// environment names: one built by orchestrator/backends (Docker with its subnets and engines,
// or a Kubernetes cluster), lifecycle/dockerbackend over a Docker client of one's own,
// internal/fakebackend in tests. The orchestrator does not close a backend it was given, and
// tells it of its retries when it listens (backend.RetryNotifier). A backend's own options
// (a Docker engine's subnets, say) are given to its constructor.
func WithBackend(b backend.Backend) Option {
	return func(cfg *config) error {
		if b == nil {
			return fmt.Errorf("with backend: nil backend")
		}
		cfg.backend = b
		return nil
	}
}

// PlacementError is a sample that no engine could take (a backend of several engines): it
// says why for each engine, and matches ErrUnavailable.
type PlacementError = backend.PlacementError

// New returns an Orchestrator. It does not contact the engine: TaskInit checks the
// prerequisites once, on first use.
func New(opts ...Option) (*Orchestrator, error) {
	cfg := config{
		log:      slog.New(slog.DiscardHandler),
		observer: func(Event) {},
		policy:   compose.DefaultPolicy(),
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("new orchestrator: %w", err)
		}
	}
	if cfg.stateDir == "" {
		cfg.stateDir = tracking.DefaultStateDir()
	}
	o := &Orchestrator{cfg: cfg, owner: labels.SelfOwner()}
	o.initLimits(cfg.limits.orDefaults(cpus.Count()))
	o.backend = cfg.backend
	if o.backend == nil {
		b, err := defaultBackend(cfg)
		if err != nil {
			return nil, fmt.Errorf("new orchestrator: %w", err)
		}
		o.backend, o.ownsBackend = b, true
	} else if len(cfg.docker.engines) > 0 {
		return nil, fmt.Errorf("new orchestrator: WithEngines does not go with WithClient or WithBackend")
	}
	if rn, ok := o.backend.(backend.RetryNotifier); ok {
		rn.OnRetry(o.onRetry)
	}
	o.pooler, _ = backend.AsPooler(o.backend)
	return o, nil
}

// Backend is the backend the orchestrator runs samples on.
func (o *Orchestrator) Backend() backend.Backend { return o.backend }

// Engines describes the engines samples spread over (a backend of several engines), as last
// seen; nil for a backend of one engine.
func (o *Orchestrator) Engines() []backend.EngineStatus {
	if l, ok := backend.AsEngineLister(o.backend); ok {
		return l.Engines()
	}
	return nil
}

// engineName names the engine of a backend of one (backend.DefaultEngine for Docker's), ""
// when the backend does not say.
func (o *Orchestrator) engineName() string {
	return backend.EngineName(o.backend)
}

// Close releases the orchestrator's backend (unless it was given with WithBackend; a client
// given with the deprecated WithClient stays open). It removes no sample anyone holds (call Cleanup on tasks
// and samples first), only those still waiting in the warm pool of a task that was not cleaned
// up, whose refills it ends.
func (o *Orchestrator) Close() error {
	perr := o.closePools()
	var err error
	if o.ownsBackend {
		err = o.backend.Close()
	}
	return cmp.Or(perr, err)
}

// prerequisites checks the engine once per orchestrator; a failure is retried next time.
func (o *Orchestrator) prerequisites(ctx context.Context) (backend.Info, error) {
	o.prereqMu.Lock()
	defer o.prereqMu.Unlock()
	if o.prereqInfo != nil {
		return *o.prereqInfo, nil
	}
	info, err := o.backend.Ping(ctx, o.cfg.pingTimeout)
	if err != nil {
		return info, err
	}
	o.prereqInfo = &info
	return info, nil
}

func (o *Orchestrator) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	o.cfg.observer(e)
}
