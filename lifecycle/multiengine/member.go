package multiengine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// How often what placement relies on is checked again.
const (
	// contactEvery: an engine last heard from longer ago is pinged before a sample goes there.
	contactEvery = time.Second
	// recheckDown: an engine marked down is asked again after this long.
	recheckDown = 5 * time.Second
	// countEvery: the samples on an engine are counted again after this long, to see those
	// other processes started and removed.
	countEvery = 10 * time.Second
	// startGrace: a sample placed this recently counts even before a count sees its
	// containers (they may not exist yet).
	startGrace = 2 * time.Minute
)

// member is one engine and what this process knows of it.
type member struct {
	name   string
	b      backend.Backend
	max    int
	labels map[string]string
	// configured is the engine's endpoint as its EngineConfig gave it (New), which Describe
	// reports; "" for a member given as a backend.
	configured string

	mu sync.Mutex
	// down: the engine did not answer at checked; downErr says how.
	down    bool
	downErr error
	checked time.Time
	// contact is when the engine last answered.
	contact time.Time
	cpus    int
	// live are the projects on the engine, with when this process placed them (zero for
	// those found by a count); counted is when they were last counted.
	live    map[string]time.Time
	counted time.Time
	// images are the references known present (true) or absent (false) on the engine.
	images map[string]bool
}

func newMember(m Member) *member {
	return &member{name: m.Name, b: m.Backend, max: m.MaxSamples, labels: maps.Clone(m.Labels),
		live: map[string]time.Time{}, images: map[string]bool{}}
}

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// validName checks an engine's name: it appears in listings, events and command lines.
func validName(name string) error {
	if !namePattern.MatchString(name) {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine name %q: want letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit)", name))
	}
	return nil
}

// ping asks the engine whether it answers, and records the outcome.
func (m *member) ping(ctx context.Context, timeout time.Duration) (backend.Info, error) {
	info, err := m.b.Ping(ctx, timeout)
	if ctx.Err() != nil {
		return info, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	m.checked = now
	if err != nil {
		m.down, m.downErr = true, err
		return info, err
	}
	m.down, m.downErr, m.contact = false, nil, now
	if info.NCPU > 0 {
		m.cpus = info.NCPU
	}
	return info, nil
}

// failed records an error of a call to the engine: one that says the engine is unreachable
// marks it down.
func (m *member) failed(err error) {
	if err == nil || !backend.Unreachable(m.b, err) {
		return
	}
	m.mu.Lock()
	m.down, m.downErr, m.checked = true, err, time.Now()
	m.mu.Unlock()
}

// answered records that the engine just answered a call: it is up, and placement need not
// ping it for a while.
func (m *member) answered() {
	m.mu.Lock()
	m.down, m.downErr, m.contact = false, nil, time.Now()
	m.mu.Unlock()
}

// readyTimeout bounds the ping of an engine marked down, before a call that spans every
// engine: one that is gone costs the others' answer this long at most.
const readyTimeout = time.Second

// ready is nil for an engine to ask: one not marked down, or one marked down that answers a
// short ping again (a daemon restarted); else the error of its absence.
func (m *member) ready(ctx context.Context) error {
	if !m.isDown() {
		return nil
	}
	if _, err := m.ping(ctx, readyTimeout); err != nil {
		return newDownError(err)
	}
	return nil
}

// downError is the error of a call not made because the engine was found down. It is
// ErrUnavailable (the engine may come back), not the ping's ErrPrerequisite, and keeps the
// engine's own error beneath, so that Unreachable still recognises it.
type downError struct {
	msg   string
	cause error
}

func newDownError(err error) *downError {
	cause := err
	var e *errdefs.Error
	if errors.As(err, &e) && e.Category == errdefs.ErrPrerequisite && e.Cause != nil {
		cause = e.Cause
	}
	return &downError{msg: err.Error(), cause: cause}
}

func (e *downError) Error() string   { return "down: " + e.msg }
func (e *downError) Unwrap() []error { return []error{e.cause, errdefs.ErrUnavailable} }

// refresh makes sure what placement knows of the engine is recent: whether it answers, and
// how many samples it holds.
func (m *member) refresh(ctx context.Context) {
	m.mu.Lock()
	now := time.Now()
	needPing := (m.down && now.Sub(m.checked) >= recheckDown) || (!m.down && now.Sub(m.contact) >= contactEvery)
	needCount := now.Sub(m.counted) >= countEvery
	m.mu.Unlock()
	if needPing {
		if _, err := m.ping(ctx, 0); err != nil {
			return
		}
	}
	if m.isDown() || !needCount {
		return
	}
	m.count(ctx)
}

func (m *member) isDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

// count counts the projects of the engine's running containers, keeping the placements made
// in the last startGrace (their containers may not exist yet).
func (m *member) count(ctx context.Context) {
	start := time.Now()
	list, err := m.b.Containers(ctx, []string{labels.ManagedFilter}, false)
	if err != nil {
		m.failed(err)
		return
	}
	found := map[string]bool{}
	for _, c := range list {
		if p := c.Labels[labels.ComposeProjectLabel]; p != "" {
			found[p] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, at := range m.live {
		if !found[p] && (at.IsZero() || start.Sub(at) > startGrace) {
			delete(m.live, p)
		}
	}
	for p := range found {
		if _, ok := m.live[p]; !ok {
			m.live[p] = time.Time{}
		}
	}
	m.counted, m.contact = start, start
}

// place records a project placed on the engine.
func (m *member) place(project string) {
	m.mu.Lock()
	m.live[project] = time.Now()
	m.mu.Unlock()
}

// gone forgets a removed project.
func (m *member) gone(project string) {
	m.mu.Lock()
	delete(m.live, project)
	m.mu.Unlock()
}

// hasImage records what is known of ref on the engine.
func (m *member) hasImage(ref string, present bool) {
	m.mu.Lock()
	m.images[ref] = present
	m.mu.Unlock()
}

// image asks the engine for ref and records the answer: the image, or ErrNotFound (recorded
// as absent), or another error (an engine unreachable is marked down).
func (m *member) image(ctx context.Context, ref string) (backend.ImageInfo, error) {
	info, err := m.b.Image(ctx, ref)
	switch {
	case err == nil:
		m.hasImage(ref, true)
	case errdefs.Kind(err) == "not_found":
		m.hasImage(ref, false)
	default:
		m.failed(err)
	}
	return info, err
}

// knowsImage says whether ref is known present, and whether anything is known of it.
func (m *member) knowsImage(ref string) (present, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	present, known = m.images[ref]
	return present, known
}

func (m *member) status() backend.EngineStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := backend.EngineStatus{Name: m.name, Endpoint: m.b.Endpoint(), Labels: maps.Clone(m.labels), MaxSamples: m.max,
		Live: len(m.live), Down: m.down}
	if m.downErr != nil {
		s.Err = m.downErr.Error()
	}
	return s
}

// optional is m's engine as the optional interface T (named iface), or the *EngineError of
// op saying the engine lacks it: several engines do what their members do.
func optional[T any](m *member, op, iface string) (T, error) {
	x, ok := m.b.(T)
	if !ok {
		return x, &backend.EngineError{Engine: m.name, Err: backend.Lacks(op, m.b, iface)}
	}
	return x, nil
}
