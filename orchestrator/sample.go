package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/hostdir"
	"github.com/composebox/composebox/orchestrator/backend"
)

// SampleSpec configures one sample. The zero value is a sample with a random id.
type SampleSpec struct {
	// ID identifies the sample in labels (dev.composebox.sample). Default: the random short id
	// that also makes the project name unique.
	ID string
	// Metadata is interpolated as SAMPLE_METADATA_<KEY>, for the keys the files reference.
	Metadata map[string]string
	// ReadyTimeout overrides the readiness budget (default: the task's, else derived from the
	// healthchecks).
	ReadyTimeout time.Duration
	// KeepOnFailure leaves a sample that failed to become ready in place, for debugging; it is
	// still registered, so Task.Cleanup removes it.
	KeepOnFailure bool

	// from, when set, is a recorded state the sample starts from (fork, SampleFrom).
	from *backend.State
}

// Sample is one live copy of a task's project. It is safe for concurrent use.
type Sample struct {
	o       *Orchestrator
	task    *Task // nil for a sample opened with Orchestrator.Open
	id      string
	project string
	// engine names the engine the sample lives on.
	engine    string
	sandboxes []*Sandbox
	created   time.Time
	// calls are the exec and file calls in flight on the sandboxes, stopped by Cleanup.
	calls *calls
	// stopped maps the services whose containers exist but do not run to those containers.
	stopped map[string]stoppedService
	// pooled says the sample was started for the task's warm pool.
	pooled bool
	// announced, set when a refill puts the sample in the pool, is closed once its pool_warm
	// was emitted (see pool.fill).
	announced chan struct{}
	// pending, when not nil, is closed once the bookkeeping of a take from the pool, written
	// after SampleInit returned, is done (see recordTake).
	pending chan struct{}

	// cleanupMu serialises Cleanup calls; cleaned is set once one succeeded.
	cleanupMu sync.Mutex
	cleaned   bool

	// proj is the normalised project the sample was started with; states are its snapshots
	// (see snapshot.go).
	proj   *types.Project
	states sampleStates

	// stopWatch ends the goroutine that turns the gateway's denials into egress_denied events
	// (see watchEgress); nil when none runs.
	stopWatch context.CancelFunc
	watching  sync.WaitGroup
}

// stoppedService is a service whose container exists but does not run: a one-shot service
// that finished, or one that died.
type stoppedService struct {
	diagnosis backend.Diagnosis
}

// ID is the sample's id; Project its compose project name (cbx-<task>-<shortid>).
func (s *Sample) ID() string      { return s.id }
func (s *Sample) Project() string { return s.project }

// Engine names the engine the sample lives on: the one placement chose among several (a
// backend of several engines), "default" for the one engine of a Docker backend, "" when the
// backend does not say.
func (s *Sample) Engine() string { return s.engine }

// Sandboxes are the sample's running services, the default one first, then by name.
func (s *Sample) Sandboxes() []*Sandbox { return append([]*Sandbox(nil), s.sandboxes...) }

// Default is the default service's sandbox.
func (s *Sample) Default() *Sandbox { return s.sandboxes[0] }

// Sandbox returns the named service's sandbox. A service whose container exists but does
// not run (a one-shot service that finished, one that died) is ErrUnavailable, with its
// state, exit code, OOM flag and log tail as last seen; an unknown service is ErrNotFound.
func (s *Sample) Sandbox(service string) (*Sandbox, error) {
	for _, sb := range s.sandboxes {
		if sb.service == service {
			return sb, nil
		}
	}
	if st, ok := s.stopped[service]; ok {
		return nil, cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("sandbox %s in %s: %s", service, s.project, st.diagnosis))
	}
	names := make([]string, len(s.sandboxes))
	for i, sb := range s.sandboxes {
		names[i] = sb.service
	}
	return nil, cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("sandbox %s in %s: no such running service (services: %v)", service, s.project, names))
}

// SampleInit starts a new copy of the task's project and waits until every service is running
// and, where it has a healthcheck, healthy (a service that exits 0 counts as done). The project
// is registered for cleanup before it starts, so Task.Cleanup removes it even if SampleInit is
// interrupted. On failure the project is torn down (unless KeepOnFailure) and the error names
// every service that was not ready, with its state, exit code, health output and log tail.
//
// When the task keeps a warm pool (TaskSpec.Warm, Task.Prewarm) and a sample in it is ready,
// SampleInit takes that one instead of starting a new one.
func (t *Task) SampleInit(ctx context.Context, spec SampleSpec) (*Sample, error) {
	// While the pool fills from a snapshot, SampleInit's samples start there, warm or cold.
	spec.from = t.poolFrom()
	if s := t.takeWarm(ctx, spec); s != nil {
		return s, nil
	}
	return t.startSample(ctx, spec, nil)
}

// startSample starts a sample. A refill of the warm pool passes the start slot it already
// holds (refills take only capacity no SampleInit waits for), and gets a pooled sample; the
// refill releases that slot itself once the sample is in the pool, so that a SampleInit waiting
// for the slot finds the sample there (see slotOrWarm).
func (t *Task) startSample(ctx context.Context, spec SampleSpec, refill *slot) (*Sample, error) {
	start := time.Now()
	ctx, leave, err := t.enter(ctx)
	if err != nil {
		return nil, fmt.Errorf("sample init: %w", err)
	}
	defer leave()
	slot := refill
	if slot == nil {
		var warm *Sample
		if slot, warm, err = t.slotOrWarm(ctx, spec); err != nil {
			return nil, fmt.Errorf("sample init %s: %w", t.name, err)
		}
		if warm != nil {
			return warm, nil
		}
	}
	if refill == nil {
		// The slot is released with the start's outcome as soon as it is known, which steers
		// the ramp; this only covers the returns before that.
		defer slot.release(neutral)
	}

	short := compose.NewSampleID()
	id := spec.ID
	if id == "" {
		id = short
	}
	s := &Sample{o: t.o, task: t, id: id, project: compose.ProjectName(t.name, short), created: start, calls: newCalls(), pooled: refill != nil}
	p, err := t.sampleProject(ctx, s, spec)
	if err != nil {
		return nil, fmt.Errorf("sample init %s: %w", s.project, t.o.engineLost(err))
	}
	if err := t.register(s); err != nil {
		return nil, err
	}
	if err := t.o.track(s); err != nil {
		t.unregister(s)
		return nil, fmt.Errorf("sample init %s: %w", s.project, t.o.engineLost(err))
	}
	fail := func(err error) (*Sample, error) {
		// Before the teardown: removing a failed sample is not a start.
		slot.release(t.o.outcomeOf(err))
		err = t.o.engineLost(err)
		if ctx.Err() != nil && t.life.Err() != nil {
			err = cbxerr.Wrap(cbxerr.ErrUnavailable, err, fmt.Sprintf("task %s is being cleaned up", t.name))
		}
		err = fmt.Errorf("sample init %s: %w", s.project, err)
		t.emit(Event{Kind: EventSampleFailed, Task: t.name, Sample: id, Project: s.project, Duration: time.Since(start), Err: err})
		if !spec.KeepOnFailure {
			if cerr := s.Cleanup(ctx); cerr != nil {
				t.o.cfg.log.Warn("teardown of failed sample", "project", s.project, "err", cerr)
			}
		}
		return nil, err
	}
	wait := backend.WaitOptions{
		Timeout: cmp.Or(spec.ReadyTimeout, t.spec.ReadyTimeout),
		OnReady: func(st backend.ServiceState) {
			t.emit(Event{Kind: EventServiceReady, Task: t.name, Sample: id, Project: s.project, Service: st.Service, Duration: time.Since(start)})
		},
	}
	// The host paths were checked when the task was loaded; a directory swapped for a symlink
	// since then (by a sample's container, through a bind of the task directory) must not be
	// followed. Checked again here, right before the containers are created, each is also
	// rewritten to the path it resolves to now.
	if err := t.samplePolicy(s.project).RecheckHostPaths(p); err != nil {
		return fail(err)
	}
	var onProgress func(service, status string)
	if t.o.cfg.observed {
		onProgress = func(service, status string) {
			t.emit(Event{Kind: EventServiceProgress, Task: t.name, Sample: id, Project: s.project, Service: service, Message: status, Duration: time.Since(start)})
		}
	}
	if err := t.place(ctx, s, p, spec.from); err != nil {
		return fail(err)
	}
	if spec.from != nil {
		if err := t.o.restore(ctx, *spec.from, p); err != nil {
			return fail(err)
		}
	}
	s.proj = p
	if err := t.o.backend.Up(ctx, p, backend.UpOptions{Wait: wait, OnProgress: onProgress, HostAccess: t.policy.AllowHostAccess, HostRoutes: t.policy.AllowHostRoutes}); err != nil {
		return fail(err)
	}
	t.emit(Event{Kind: EventSampleStarted, Task: t.name, Sample: id, Project: s.project, Duration: time.Since(start)})
	states, err := t.o.backend.Wait(ctx, p, wait)
	if err != nil {
		return fail(err)
	}
	if refill == nil {
		slot.release(succeeded)
	}
	order, err := compose.ServiceOrder(p)
	if err != nil {
		return fail(err)
	}
	byName := map[string]backend.ServiceState{}
	for _, st := range states {
		byName[st.Service] = st
	}
	for _, name := range order {
		st, ok := byName[name]
		if !ok {
			continue
		}
		if st.State != "running" {
			// A one-shot service that finished: nothing to exec into.
			s.markStopped(name, backend.Diagnosis{Container: st.ContainerID, Name: st.Container, Status: st.State, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, LogTail: st.Logs})
			continue
		}
		s.sandboxes = append(s.sandboxes, t.o.newSandbox(s, name, st.ContainerID, st.Container, st.WorkingDir, st.User, name == t.defaultService))
	}
	if len(s.sandboxes) == 0 || !s.sandboxes[0].isDefault {
		return fail(cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("default service %s is not running", t.defaultService)))
	}
	t.emit(Event{Kind: EventSampleHealthy, Task: t.name, Sample: id, Project: s.project, Duration: time.Since(start)})
	s.watchEgress(p)
	return s, nil
}

// place chooses the sample's engine when the backend spans several (backend.Placer), and says
// where it went and why. A sample started from a state (from) goes to that state's engine.
func (t *Task) place(ctx context.Context, s *Sample, p *types.Project, from *backend.State) error {
	pl, ok := backend.AsPlacer(t.o.backend)
	if !ok {
		s.engine = t.o.engineName()
		return nil
	}
	req := backend.PlaceRequest{Project: p, Task: t.name, Labels: t.spec.EngineLabels}
	if from != nil {
		// A sample started from a recorded state goes where the state is: with the project
		// that owns it (its sample's, or the task's that keeps it).
		req.From = cmp.Or(from.Owner, from.Project)
	}
	where, err := pl.Place(ctx, req)
	if err != nil {
		return err
	}
	s.engine = where.Engine
	t.emit(Event{Kind: EventSamplePlaced, Task: t.name, Sample: s.id, Project: s.project, Engine: where.Engine, Message: where.Reason})
	return nil
}

// sampleProject is the task's project normalised for this sample. When the files reference
// per-sample variables (SAMPLE_METADATA_*, COMPOSE_PROJECT_NAME, a layout's names and log
// paths), they are loaded again with this sample's values, and policed again; the directories
// the sample binds are made. Each adaptation Normalize makes is an EventAdapted, and a warning
// in the log for the task's first sample (debug after that: the same change, renamed).
func (t *Task) sampleProject(ctx context.Context, s *Sample, spec SampleSpec) (*types.Project, error) {
	p := t.project
	if t.perSample {
		vars := t.resolution.SampleVars(s.project, t.o.sampleDir(s.project))
		var err error
		opts := t.loadOptions(vars, spec.Metadata)
		opts.Name = s.project
		opts.QuietUnset = true // TaskInit's load warned about them
		if p, err = compose.Load(ctx, t.resolution, opts); err != nil {
			return nil, err
		}
		t.policy.ApplyDefaults(p)
		if err := t.checkImageOwners(ctx, p); err != nil {
			return nil, err
		}
		if dirs := vars.Referenced(p); len(dirs) > 0 {
			if err := makeSampleDirs(t.o.sampleDir(s.project), dirs); err != nil {
				return nil, err
			}
		}
	}
	var adapted []compose.Adaptation
	np, err := compose.Normalize(p, compose.NormalizeOptions{
		Name:       s.project,
		Task:       t.name,
		Sample:     s.id,
		Owner:      t.o.owner,
		Created:    s.created,
		APIVersion: t.apiVersion,
		Images:     t.images,
		OnAdapt:    func(a compose.Adaptation) { adapted = append(adapted, a) },
	})
	if err != nil {
		return nil, err
	}
	level := slog.LevelDebug
	if t.adaptedOnce.CompareAndSwap(false, true) {
		level = slog.LevelWarn
	}
	for _, a := range adapted {
		t.o.cfg.log.Log(ctx, level, "adapted for parallel samples", "task", t.name, "project", s.project, "adaptation", a.Message)
		t.emit(Event{Kind: EventAdapted, Task: t.name, Sample: s.id, Project: s.project, Service: a.Service, Message: a.Message})
	}
	// Mark the default service, so that a fresh process (`composebox exec -p`) finds it from
	// labels alone.
	if svc, ok := np.Services[t.defaultService]; ok {
		svc.CustomLabels = maps.Clone(svc.CustomLabels)
		svc.CustomLabels[labels.LabelDefaultService] = "true"
		np.Services[t.defaultService] = svc
	}
	if s.pooled {
		markPooled(np)
	}
	return np, nil
}

// makeSampleDirs makes the directory of the sample's own (root) and, in it, the directories
// its files bind (dirs), writable by any user: the container's user may be anyone, and they are
// the sample's alone. root is mounted nosuid and nodev first, so that a setuid binary or a
// device node an agent leaves in them is inert on the host; its removal (tracking.Forget)
// unmounts it.
func makeSampleDirs(root string, dirs []string) error {
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return fmt.Errorf("make the sample's directory: %w", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("make the sample's directory: %w", err)
	}
	if err := isDir(root); err != nil {
		return err
	}
	if err := hostdir.MakeInert(root); err != nil {
		return fmt.Errorf("make the sample's directory: %w", err)
	}
	for _, dir := range dirs {
		if !compose.Within(dir, root) {
			return fmt.Errorf("make the sample's directory: %s is not inside %s", dir, root)
		}
		if err := os.Mkdir(dir, 0o777); err != nil && !os.IsExist(err) {
			return fmt.Errorf("make the sample's directory: %w", err)
		}
		// Never follow a symlink left in its place: the chmod would open up its target.
		if err := isDir(dir); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil { // past the umask
			return fmt.Errorf("make the sample's directory: %w", err)
		}
	}
	return nil
}

// isDir fails unless path is a directory itself, not a symlink to one.
func isDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("make the sample's directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("make the sample's directory: %s is a %s, not a directory", path, fi.Mode().Type())
	}
	return nil
}

func (t *Task) register(s *Sample) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("sample init %s: task %s is cleaned up", s.project, t.name))
	}
	t.samples[s.project] = s
	t.projects[s.project] = true
	return nil
}

func (t *Task) unregister(s *Sample) {
	t.mu.Lock()
	delete(t.samples, s.project)
	t.mu.Unlock()
}

// Cleanup stops the commands still running in the sample, then removes its containers,
// networks and volumes. It runs on a context of its own, detached from ctx and bounded by
// opts' Timeout (default 2 minutes), so it works after ctx is cancelled. A Cleanup that
// failed is retried by the next call; after one that succeeded, calls do nothing.
func (s *Sample) Cleanup(ctx context.Context, opts ...CleanupOptions) error {
	dctx, cancel := teardownContext(ctx, opts...)
	defer cancel()
	return s.cleanup(dctx)
}

// cleanup is Cleanup on a teardown context.
func (s *Sample) cleanup(dctx context.Context) error {
	s.cleanupMu.Lock()
	defer s.cleanupMu.Unlock()
	if s.cleaned {
		return nil
	}
	start := time.Now()
	s.settled(dctx)
	s.unwatchEgress()
	var errs *multierror.Error
	if err := s.calls.stop(dctx); err != nil {
		errs = multierror.Append(errs, err)
	}
	// The slot wait is bounded by the teardown's deadline, not by ctx: see teardownContext.
	// The directory the sample bound and its state cache record go with it.
	if _, err := s.o.down(dctx, s.project); err != nil {
		errs = multierror.Append(errs, err)
	}
	var cleanupErr error
	if err := errs.ErrorOrNil(); err != nil {
		cleanupErr = fmt.Errorf("sample cleanup %s: %w", s.project, s.o.engineLost(err))
	}
	task := ""
	if s.task != nil {
		task = s.task.name
		if cleanupErr == nil {
			// A sample whose teardown failed stays the task's, so that Task.Cleanup retries it.
			s.task.unregister(s)
		}
	}
	s.cleaned = cleanupErr == nil
	if s.cleaned {
		s.states.clear() // its snapshots went with it
	}
	s.emit(Event{Kind: EventSampleRemoved, Task: task, Sample: s.id, Project: s.project, Duration: time.Since(start), Err: cleanupErr})
	return cleanupErr
}

// markStopped records a service whose container exists but does not run.
func (s *Sample) markStopped(service string, d backend.Diagnosis) {
	if s.stopped == nil {
		s.stopped = map[string]stoppedService{}
	}
	s.stopped[service] = stoppedService{diagnosis: d}
}
