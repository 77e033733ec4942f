// Package multiengine is a backend of several Docker Engines behind the orchestrator's backend
// boundary (orchestrator/backend). A whole sample lives on one engine: Place chooses it, the
// least loaded (live samples over capacity) of those that answer and have room, ties going to
// one that already has the sample's images (internal/placement); every later call about the
// project or its containers goes to that engine. Images go where samples go: a task's builds
// are recorded and run again on each engine that gets its samples, once per engine and tag;
// the images a task only names are streamed from an engine that has them (SaveImages into
// LoadImages through a pipe). Listings, sweeps, markers and the death watch span every engine,
// and what they return names the engine.
//
// An engine that stops answering is marked down and skipped by placement until it answers
// again; its samples' calls fail as ErrUnavailable naming it.
package multiengine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"golang.org/x/sync/singleflight"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Member is one engine of a Backend.
type Member struct {
	// Name names the engine in placements, listings and errors.
	Name string
	// Backend is the engine.
	Backend backend.Backend
	// MaxSamples is the engine's capacity: placement skips it once it holds that many samples.
	// 0 is unbounded, and the engine's load is then weighed by its CPUs.
	MaxSamples int
	// Labels describe the engine (zone, hardware...), as listed by Engines.
	Labels map[string]string
}

// Backend is several engines as one. It is safe for concurrent use.
type Backend struct {
	members []*member
	byName  map[string]*member
	log     *slog.Logger
	// owned says Close closes the members (New made them).
	owned bool

	mu sync.Mutex
	// projects maps each project this process knows of to its engine; a nil engine is a
	// project placed nowhere (its placement failed), which has nothing to remove.
	projects map[string]*member
	// containers maps container ids and names to their engine, and byProject the keys of each
	// project's containers, dropped with the project.
	containers map[string]*member
	byProject  map[string][]string
	// builds are the task image builds seen, by tag, to run again on the other engines.
	builds map[string]*buildRecord
	// baseRef is composebox's base image once BaseImage made it somewhere.
	baseRef string

	// flights is one image transfer or build per engine and reference at a time.
	flights singleflight.Group
}

var (
	_ backend.Backend       = (*Backend)(nil)
	_ backend.Placer        = (*Backend)(nil)
	_ backend.EngineLister  = (*Backend)(nil)
	_ backend.RetryNotifier = (*Backend)(nil)
)

// Options configures a Backend. The zero value is the default.
type Options struct {
	// Logger receives diagnostics (default: discarded).
	Logger *slog.Logger
}

// NewFromBackends returns a Backend over members, which Close does not close. Names must be
// unique and non-empty.
func NewFromBackends(members []Member, opts Options) (*Backend, error) {
	if len(members) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, "engines: none given")
	}
	b := &Backend{
		byName: map[string]*member{}, log: cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		projects: map[string]*member{}, containers: map[string]*member{}, byProject: map[string][]string{},
		builds: map[string]*buildRecord{},
	}
	for _, m := range members {
		if err := validName(m.Name); err != nil {
			return nil, err
		}
		if b.byName[m.Name] != nil {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine %s: named twice", m.Name))
		}
		if m.Backend == nil {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine %s: no backend", m.Name))
		}
		if m.MaxSamples < 0 {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("engine %s: max_samples %d is negative", m.Name, m.MaxSamples))
		}
		mm := newMember(m)
		b.members = append(b.members, mm)
		b.byName[m.Name] = mm
	}
	return b, nil
}

// Kind is the members' kind ("docker").
func (b *Backend) Kind() string { return b.members[0].b.Kind() }

// Capabilities are those every member declares.
func (b *Backend) Capabilities() backend.Capabilities {
	all := true
	for _, m := range b.members {
		all = all && backend.CapabilitiesOf(m.b).HostReaper
	}
	return backend.Capabilities{HostReaper: all}
}

// Several engines do what their members do: each optional verb goes to the member that holds
// the project (or to all of them), and fails there, naming the engine, when that member lacks
// it. Forks and egress stay with a backend of one engine.
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
	_ backend.Placer         = (*Backend)(nil)
	_ backend.EngineLister   = (*Backend)(nil)
	_ backend.SweepFinisher  = (*Backend)(nil)
	_ backend.RetryNotifier  = (*Backend)(nil)
)

// Endpoint lists the engines as NAME=ENDPOINT, comma-separated.
func (b *Backend) Endpoint() string {
	parts := make([]string, len(b.members))
	for i, m := range b.members {
		parts[i] = m.name + "=" + m.b.Endpoint()
	}
	return strings.Join(parts, ",")
}

// Member returns the named engine's backend.
func (b *Backend) Member(name string) (backend.Backend, bool) {
	m := b.byName[name]
	if m == nil {
		return nil, false
	}
	return m.b, true
}

// Engines describes each engine as last seen, in the order given.
func (b *Backend) Engines() []backend.EngineStatus {
	out := make([]backend.EngineStatus, len(b.members))
	for i, m := range b.members {
		out[i] = m.status()
	}
	return out
}

// Ping pings every engine at once. It succeeds when at least one answers, with the lowest API
// version, memory and CPU count of those that did (what a sample may meet wherever it goes);
// when none answers it is ErrPrerequisite naming each engine's failure.
func (b *Backend) Ping(ctx context.Context, timeout time.Duration) (backend.Info, error) {
	infos := make([]backend.Info, len(b.members))
	errs := make([]error, len(b.members))
	var wg sync.WaitGroup
	for i, m := range b.members {
		wg.Go(func() { infos[i], errs[i] = m.ping(ctx, timeout) })
	}
	wg.Wait()
	var info backend.Info
	var failed *multierror.Error
	up := 0
	for i, err := range errs {
		if err != nil {
			failed = multierror.Append(failed, &backend.EngineError{Engine: b.members[i].name, Err: err})
			continue
		}
		in := infos[i]
		if up == 0 {
			info = in
			info.Endpoint = b.Endpoint()
		} else {
			if lowerVersion(in.APIVersion, info.APIVersion) {
				info.APIVersion = in.APIVersion
			}
			info.MemTotal = minKnown(info.MemTotal, in.MemTotal)
			info.NCPU = int(minKnown(int64(info.NCPU), int64(in.NCPU)))
		}
		up++
	}
	if up == 0 {
		return info, errdefs.Wrap(errdefs.ErrPrerequisite, failed.ErrorOrNil(), "no engine answers")
	}
	for _, err := range errs {
		if err != nil {
			b.log.Warn("engine down", "err", err)
		}
	}
	return info, nil
}

// lowerVersion compares two Engine API versions ("1.41" < "1.45").
func lowerVersion(a, c string) bool {
	var am, an, cm, cn int
	if _, err := fmt.Sscanf(a, "%d.%d", &am, &an); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(c, "%d.%d", &cm, &cn); err != nil {
		return true
	}
	return am < cm || (am == cm && an < cn)
}

// minKnown is the lower of two sizes, where 0 is unknown.
func minKnown(a, c int64) int64 {
	switch {
	case a == 0:
		return c
	case c == 0:
		return a
	}
	return min(a, c)
}

// Doctor runs every engine's checks, each named after its engine, then opts.Extra once.
func (b *Backend) Doctor(ctx context.Context, opts backend.DoctorOptions) backend.Report {
	reports := make([]backend.Report, len(b.members))
	extra := opts.Extra
	opts.Extra = nil
	var wg sync.WaitGroup
	for i, m := range b.members {
		wg.Go(func() { reports[i] = backend.RunDoctor(ctx, m.b, opts) })
	}
	wg.Wait()
	out := backend.Report{OK: true}
	for i, r := range reports {
		out.OK = out.OK && r.OK
		for _, c := range r.Checks {
			c.Name += " (" + b.members[i].name + ")"
			out.Checks = append(out.Checks, c)
		}
	}
	for _, c := range extra {
		out.OK = out.OK && c.Status != backend.Fail
		out.Checks = append(out.Checks, c)
	}
	return out
}

// Transient reports an error any engine takes as passing trouble.
func (b *Backend) Transient(err error) bool {
	return slices.ContainsFunc(b.members, func(m *member) bool { return backend.Transient(m.b, err) })
}

// Unreachable reports an error any engine takes as its absence.
func (b *Backend) Unreachable(err error) bool {
	return slices.ContainsFunc(b.members, func(m *member) bool { return backend.Unreachable(m.b, err) })
}

// OnRetry tells fn of every retried call of every engine that retries.
func (b *Backend) OnRetry(fn func(op string, err error)) {
	for _, m := range b.members {
		if rn, ok := m.b.(backend.RetryNotifier); ok {
			rn.OnRetry(fn)
		}
	}
}

// Close closes the engines New made.
func (b *Backend) Close() error {
	if !b.owned {
		return nil
	}
	var errs []error
	for _, m := range b.members {
		if err := m.b.Close(); err != nil {
			errs = append(errs, &backend.EngineError{Engine: m.name, Err: err})
		}
	}
	return errors.Join(errs...)
}
