package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Defaults of Options.
const (
	DefaultLeaseTTL     = 30 * time.Second
	DefaultMaxPerLease  = 64
	DefaultMaxJSONBody  = 8 << 20
	DefaultMaxExecInput = 64 << 20
	DefaultWriteTimeout = 60 * time.Second
	// teardownTimeout bounds the removals the server starts on its own (an expired lease, Close).
	teardownTimeout = 5 * time.Minute
)

// Options tune a Server. The zero value is the documented defaults, without a token.
type Options struct {
	// LeaseTTL is how long a lease lives without a heartbeat when its client asks for no TTL of
	// its own (default 30 s).
	LeaseTTL time.Duration
	// MaxPerLease bounds the requests one lease runs at once; past it a request is KindBusy
	// (default 64).
	MaxPerLease int
	// MaxJSONBody bounds a JSON request body (default 8 MiB).
	MaxJSONBody int64
	// MaxExecInput bounds an exec's stdin (default 64 MiB).
	MaxExecInput int64
	// WriteTimeout is how long one write of a streamed response may wait for a client that
	// does not read (default 60 s); past it the stream is cut and its command killed.
	WriteTimeout time.Duration
	// Token, when set, must come with every request as "Authorization: Bearer <token>".
	Token string
	// Version is reported by /v1/version.
	Version string
	// Ceiling is the most a request may ask for (see Ceiling); the zero value allows nothing
	// beyond the default policy.
	Ceiling Ceiling
	// Doctor answers /v1/doctor (default: the orchestrator's Doctor, which asks its backend:
	// the Docker engines or the cluster the server runs samples on).
	Doctor func(ctx context.Context) backend.Report
	// Logger receives the server's diagnostics (default: discard).
	Logger *slog.Logger
}

// Server is the HTTP API over one orchestrator. It is safe for concurrent use.
type Server struct {
	o      *orchestrator.Orchestrator
	opts   Options
	h      http.Handler
	log    *slog.Logger
	events *events

	mu      sync.Mutex
	leases  map[string]*lease
	tasks   map[string]*taskEntry
	samples map[string]*sampleEntry
	closed  bool
	// done is closed when the server begins to stop, so that endless streams (events) end and
	// let the HTTP server drain.
	done     chan struct{}
	doneOnce sync.Once
	// expiring counts removals of expired leases in progress, which Close waits for.
	expiring sync.WaitGroup
}

type lease struct {
	id       string
	ttl      time.Duration
	expires  time.Time
	timer    *time.Timer
	inflight int
	// ended is closed when the lease ends, which ends its event streams.
	ended chan struct{}
}

type taskEntry struct {
	id    string
	lease string
	task  *orchestrator.Task
}

type sampleEntry struct {
	task     string // task id
	lease    string
	sample   *orchestrator.Sample
	detached bool
}

// New returns a server over o. It does not listen: serve Handler with an http.Server, and call
// Close when it stops.
func New(o *orchestrator.Orchestrator, opts Options) *Server {
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.MaxPerLease <= 0 {
		opts.MaxPerLease = DefaultMaxPerLease
	}
	if opts.MaxJSONBody <= 0 {
		opts.MaxJSONBody = DefaultMaxJSONBody
	}
	if opts.MaxExecInput <= 0 {
		opts.MaxExecInput = DefaultMaxExecInput
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Doctor == nil {
		opts.Doctor = func(ctx context.Context) backend.Report {
			// Without a build, Doctor's findings are all in its report.
			r, _ := o.Doctor(ctx, orchestrator.DoctorOptions{})
			return r
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		o: o, opts: opts, log: log, events: newEvents(),
		leases:  map[string]*lease{},
		tasks:   map[string]*taskEntry{},
		samples: map[string]*sampleEntry{},
		done:    make(chan struct{}),
	}
	s.h = s.routes()
	return s
}

// Handler is the API's HTTP handler.
func (s *Server) Handler() http.Handler { return s.h }

// Stopping ends the server's endless streams (events), so that http.Server.Shutdown can drain
// the other requests. Close calls it too.
func (s *Server) Stopping() { s.doneOnce.Do(func() { close(s.done) }) }

// Close stops the leases and, unless keep, removes every sample (but detached ones) and every
// task the server owns. Call it once the HTTP server has drained. Removal runs on a detached
// context with its own deadline.
func (s *Server) Close(ctx context.Context, keep bool) error {
	s.Stopping()
	s.mu.Lock()
	s.closed = true
	for _, l := range s.leases {
		l.timer.Stop()
	}
	s.leases = map[string]*lease{}
	samples, tasks := s.samples, s.tasks
	s.samples, s.tasks = map[string]*sampleEntry{}, map[string]*taskEntry{}
	s.mu.Unlock()
	s.expiring.Wait()
	if keep {
		return nil
	}
	var sl []*sampleEntry
	for _, e := range samples {
		sl = append(sl, e)
	}
	var tl []*taskEntry
	for _, t := range tasks {
		tl = append(tl, t)
	}
	return s.remove(ctx, sl, tl)
}

// remove removes samples (but detached ones), then tasks, on a detached context.
func (s *Server) remove(ctx context.Context, samples []*sampleEntry, tasks []*taskEntry) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	add := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for _, e := range samples {
		if e.detached {
			continue
		}
		wg.Go(func() { add(e.sample.Cleanup(ctx)) })
	}
	wg.Wait()
	for _, t := range tasks {
		wg.Go(func() { add(t.task.Cleanup(ctx)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// openLease registers a new lease.
func (s *Server) openLease(ttl time.Duration) (*lease, error) {
	if ttl <= 0 {
		ttl = s.opts.LeaseTTL
	}
	l := &lease{id: newID("l-"), ttl: ttl, expires: time.Now().Add(ttl), ended: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &serverError{kind: "unavailable", msg: "open lease: the server is stopping"}
	}
	s.leases[l.id] = l
	l.timer = time.AfterFunc(ttl, func() { s.expire(l.id, false) })
	return l, nil
}

// heartbeat extends a lease.
func (s *Server) heartbeat(id string) (lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		return lease{}, notFound(fmt.Sprintf("heartbeat lease %s: no such lease (expired or closed)", id))
	}
	l.expires = time.Now().Add(l.ttl)
	l.timer.Reset(l.ttl)
	return *l, nil
}

// leaseEnded is the channel closed when a live lease ends; an unknown lease is not_found.
func (s *Server) leaseEnded(id string) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		return nil, notFound(fmt.Sprintf("lease %s: no such lease (expired or closed)", id))
	}
	return l.ended, nil
}

// expire ends a lease and removes what it owns. A timer's expiry (force false) checks the
// deadline again, since a heartbeat may have raced the timer. It returns false when there was
// no such lease.
func (s *Server) expire(id string, force bool) bool {
	s.mu.Lock()
	l, ok := s.leases[id]
	if !ok || (!force && time.Now().Before(l.expires)) {
		s.mu.Unlock()
		return ok
	}
	l.timer.Stop()
	close(l.ended)
	delete(s.leases, id)
	var samples []*sampleEntry
	for p, e := range s.samples {
		if e.lease == id && !e.detached {
			samples = append(samples, e)
			delete(s.samples, p)
		}
	}
	var tasks []*taskEntry
	for tid, t := range s.tasks {
		if t.lease == id {
			tasks = append(tasks, t)
			delete(s.tasks, tid)
			s.forgetSamplesOf(tid)
		}
	}
	s.expiring.Add(1)
	s.mu.Unlock()
	defer s.expiring.Done()
	if !force {
		s.log.Info("lease expired", "lease", id, "samples", len(samples), "tasks", len(tasks))
	}
	if err := s.remove(context.Background(), samples, tasks); err != nil {
		s.log.Warn("remove what an expired lease owned", "lease", id, "err", err)
	}
	return true
}

// forgetSamplesOf drops the registry entries of a task's samples that its cleanup removes (all
// but the detached ones). Called with s.mu held.
func (s *Server) forgetSamplesOf(taskID string) {
	for p, e := range s.samples {
		if e.task == taskID && !e.detached {
			delete(s.samples, p)
		}
	}
}

// acquire counts one request against a lease's bound; release gives it back. A missing lease
// is not_found, unless optional (requests on a detached sample whose lease is gone).
func (s *Server) acquire(id string, optional bool) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[id]
	if !ok {
		if optional {
			return func() {}, nil
		}
		return nil, notFound(fmt.Sprintf("lease %s: no such lease (expired or closed)", id))
	}
	if l.inflight >= s.opts.MaxPerLease {
		return nil, &serverError{kind: KindBusy, msg: fmt.Sprintf("lease %s: %d requests already running (the server's --max-per-lease)", id, l.inflight),
			detail: map[string]any{"max_per_lease": s.opts.MaxPerLease, "retry_after_seconds": BusyRetryAfter.Seconds()}}
	}
	l.inflight++
	return func() {
		s.mu.Lock()
		l.inflight--
		s.mu.Unlock()
	}, nil
}

// authorized checks the bearer token, in constant time.
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}
