package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
	"github.com/composebox/composebox/orchestrator/backend"
)

// TaskSpec says where a task's environment comes from. Exactly one of Path, YAML and Project
// is used; with none, the task runs on the default image.
type TaskSpec struct {
	// Name names the task in labels and project names. Default: the base name of Path's
	// directory, else "task".
	Name string
	// Path is a compose file, a directory, or a Dockerfile (see compose.Resolve).
	Path string
	// YAML is a compose project as text; relative paths in it resolve against WorkingDir.
	YAML []byte
	// Project is a compose project as a struct; relative paths resolve against its WorkingDir,
	// else against WorkingDir.
	Project *types.Project
	// WorkingDir is the directory of a YAML or struct project: its task directory, which host
	// paths must stay in. Default: a private empty directory, removed by Task.Cleanup.
	WorkingDir string
	// Files are more compose files merged on top of Path's, like further -f flags.
	Files []string
	// Environment are variables for interpolation, over PassEnv and the task's .env. The
	// process environment is never read, but for PassEnv.
	Environment map[string]string
	// PassEnv names variables of the process environment that interpolation may read.
	PassEnv []string
	// Policy is this task's security policy; nil means the orchestrator's (WithPolicy).
	Policy *compose.Policy
	// Profiles activates compose profiles.
	Profiles []string
	// Prebuilt only checks that every image exists: nothing is built.
	Prebuilt bool
	// ReadyTimeout overrides the readiness budget derived from the healthchecks.
	ReadyTimeout time.Duration

	// DefaultService chooses the default service, over every other rule (the service named
	// "default", x-default, a layout's own default).
	DefaultService string
	// AgentImage adds a service "default" running this image (kept alive, with an init,
	// attached to every network of the project), which becomes the default unless
	// DefaultService says otherwise: the agent's container of suites whose harness ran it
	// beside the project (Cybench, NYU CTF Bench).
	AgentImage string
	// ImageOverrides maps services to the image they run instead of their own: a mirrored or
	// prebuilt image, or a local one. A service with a build section runs the override and is
	// not built. The image must be present locally.
	ImageOverrides map[string]string

	// Warm keeps this many ready samples of the task (a warm pool), started in the background
	// from TaskInit on, with start capacity no SampleInit is waiting for; SampleInit takes one
	// when one is ready. Zero: no pool. See Task.Prewarm.
	Warm int
	// SharePool lets other processes' SampleInits (TakeShared) take from this task's pool.
	// Sharing costs every take from the pool, this process's own included, one daemon round
	// trip, the claim that is atomic across processes; a pool that is not shared is taken from
	// in memory.
	SharePool bool
	// EngineLabels, over several engines (backends.Config.Engines), runs the task's samples
	// only on the engines carrying every one of these labels (EngineConfig.Labels).
	EngineLabels map[string]string

	// Observer, when set, also receives this task's own events: its builds', its pool's and its
	// samples', as the orchestrator's observer does (WithObserver). A server that runs tasks
	// for several clients tells each client of its own tasks only. It is called synchronously,
	// so it must not block.
	Observer Observer

	// TakeShared lets SampleInit, when this task's own pool has nothing ready, take a ready
	// sample from the shared warm pool another live process keeps for the same task (same name
	// and configuration), such as `composebox up --warm N`.
	TakeShared bool
}

// Task is a resolved, policed and built compose project from which samples are started. It is
// safe for concurrent use.
type Task struct {
	o          *Orchestrator
	name       string
	spec       TaskSpec
	resolution *compose.Resolution
	project    *types.Project // loaded and policed, not normalised
	policy     compose.Policy
	// perSample says the files reference per-sample variables (metadata, COMPOSE_PROJECT_NAME,
	// a layout's names and log paths): each sample loads them again with its own values.
	perSample bool
	// privateDir is the working directory made for a YAML or struct task that gave none.
	privateDir string
	apiVersion string
	// images maps each build service to the image built for it.
	images         map[string]string
	defaultService string
	// identity is the task's name and directory as a hash, on its built images
	// (taskIdentity): what makes an image this task's own.
	identity string
	// adaptedOnce is set once the first sample's adaptations were logged as warnings.
	adaptedOnce atomic.Bool

	// life ends when Cleanup starts, which cancels the SampleInits in flight; inflight counts
	// them, so that Cleanup removes what they created only once they have returned.
	life     context.Context
	stopLife context.CancelFunc
	inflight sync.WaitGroup
	// cleanupMu serialises Cleanup calls; cleaned is set once one succeeded.
	cleanupMu sync.Mutex
	cleaned   bool

	mu      sync.Mutex
	samples map[string]*Sample
	// projects is every project name this task ever registered: Cleanup's sweep by labels
	// removes only these, never those of another task of the same name in this process.
	projects map[string]bool
	closed   bool
	// kept are the snapshots the task keeps (SnapshotOptions.KeepWithTask, a warm pool's copy),
	// by the project name each is kept under, and by their sample's project and name.
	kept       map[string]backend.State
	keptByName map[[2]string]backend.State
	// pool is the task's warm pool, nil until Prewarm.
	pool *pool
	// fp is the task's configuration fingerprint in its warm markers, computed once.
	fpOnce sync.Once
	fp     string
}

// Name is the task's name.
func (t *Task) Name() string { return t.name }

// Project is the task's loaded project (shared: do not modify it).
func (t *Task) Project() *types.Project { return t.project }

// DefaultService is the service whose sandbox comes first in every sample.
func (t *Task) DefaultService() string { return t.defaultService }

// Images maps each build service to the image built for it (tagged by content hash).
func (t *Task) Images() map[string]string { return maps.Clone(t.images) }

// Resolution says how the task's config was found.
func (t *Task) Resolution() *compose.Resolution { return t.resolution }

// TaskInit checks the prerequisites (once per orchestrator), resolves, loads and polices the
// task's project, builds every `build:` service once (tagged by a hash of its content, so
// samples never rebuild), and checks that every other image exists locally: composebox never
// pulls.
func (o *Orchestrator) TaskInit(ctx context.Context, spec TaskSpec) (*Task, error) {
	start := time.Now()
	if _, ok := backend.AsPlacer(o.backend); len(spec.EngineLabels) > 0 && !ok {
		return nil, cbxerr.New(cbxerr.ErrInvalidConfig, "task init: engine labels choose among several engines, and this orchestrator has one (see backends.Config.Engines)")
	}
	info, err := o.prerequisites(ctx)
	if err != nil {
		return nil, fmt.Errorf("task init: %w", err)
	}
	if o.cfg.defaultImage == "" && spec.Path == "" && spec.YAML == nil && spec.Project == nil {
		// The default image is composebox's own base image: make sure it exists.
		if _, err := o.backend.BaseImage(ctx); err != nil {
			return nil, fmt.Errorf("task init: %w", err)
		}
	}
	t := &Task{o: o, spec: spec, policy: o.cfg.policy, apiVersion: info.APIVersion, samples: map[string]*Sample{}, projects: map[string]bool{}}
	t.life, t.stopLife = context.WithCancel(context.WithoutCancel(ctx))
	if spec.Policy != nil {
		t.policy = *spec.Policy
	}
	t.policy = o.containerDefaults(t.policy, info.MemTotal)
	if t.resolution, err = t.resolve(); err != nil {
		t.stopLife()
		t.removePrivateDir()
		return nil, fmt.Errorf("task init: %w", err)
	}
	t.name = taskName(spec, t.resolution)
	t.identity = taskIdentity(t.name, t.resolution.WorkingDir)
	if t.resolution.EgressOff {
		// The task's own layout says it has no internet (Harbor's allow_internet = false).
		t.policy.EgressOff = true
	}
	if err := t.init(ctx); err != nil {
		t.stopLife()
		t.removePrivateDir()
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	t.emit(Event{Kind: EventTaskReady, Task: t.name, Duration: time.Since(start)})
	if spec.Warm > 0 {
		t.prewarmFromSpec(ctx, spec.Warm)
	}
	return t, nil
}

func (t *Task) init(ctx context.Context) error {
	o := t.o
	if err := o.startTracking(ctx, t.name); err != nil {
		return err
	}
	if err := o.ensureBaseIfUsed(ctx, t.resolution); err != nil {
		return err
	}
	// Every problem of the files comes back at once: load, policy, default service and what
	// normalisation would refuse. A placeholder sample stands in for the per-sample variables,
	// so that the files load, pass the policy and plan their builds as every sample's will.
	placeholder := compose.ProjectName(t.name, "task")
	vars := t.resolution.SampleVars(placeholder, o.sampleDir(placeholder))
	p, err := compose.Prepare(ctx, t.resolution, t.loadOptions(vars, nil), compose.NormalizeOptions{Task: t.name, APIVersion: t.apiVersion})
	if err != nil {
		return err
	}
	t.policy.ApplyDefaults(p)
	if restricted(p) {
		// A list the backend cannot enforce would leave the service on the whole internet:
		// refuse the task rather than run it wider than it asked.
		if err := backend.EgressSupport(o.backend); err != nil {
			return err
		}
	}
	if t.defaultService, err = compose.DefaultService(p); err != nil {
		return err
	}
	t.perSample = len(compose.SampleVariables(p)) > 0
	t.project = p
	return t.prepareImages(ctx)
}

// loadOptions are the options every load of the task's files uses: at TaskInit (a placeholder
// sample's variables, no metadata) and for a sample whose files reference per-sample variables.
// Binds may also come from the sample's own directories (a Terminal-Bench task's log paths).
func (t *Task) loadOptions(vars compose.SampleVars, metadata map[string]string) compose.LoadOptions {
	policy := t.policy.AllowingDirs(vars.DirPaths()...)
	return compose.LoadOptions{
		Environment:    t.spec.Environment,
		PassEnv:        t.spec.PassEnv,
		Profiles:       t.spec.Profiles,
		SampleEnv:      vars.Env,
		Metadata:       metadata,
		DefaultService: t.spec.DefaultService,
		AgentImage:     t.spec.AgentImage,
		ImageOverrides: t.spec.ImageOverrides,
		Policy:         &policy,
		Logger:         t.o.cfg.log,
	}
}

func (t *Task) resolve() (*compose.Resolution, error) {
	spec := t.spec
	if spec.Project == nil && spec.YAML == nil {
		return compose.Resolve(spec.Path, compose.ResolveOptions{DefaultImage: t.o.cfg.defaultImage, ExtraFiles: spec.Files})
	}
	var r *compose.Resolution
	if spec.Project != nil {
		r = compose.FromProject(spec.Project)
	} else {
		r = compose.FromYAML(spec.YAML, "")
	}
	if r.WorkingDir == "" {
		r.WorkingDir = spec.WorkingDir
	}
	if r.WorkingDir == "" {
		// Never the current directory, which can be / or a home: host paths in the project
		// resolve against a directory of its own, empty, which Cleanup removes.
		dir, err := os.MkdirTemp("", "composebox-task-")
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		t.privateDir = dir
		r.WorkingDir = dir
	}
	abs, err := filepath.Abs(r.WorkingDir)
	if err != nil {
		return nil, err
	}
	r.WorkingDir = abs
	return r, nil
}

func (t *Task) removePrivateDir() {
	if t.privateDir != "" {
		_ = os.RemoveAll(t.privateDir)
	}
}

// ensureBaseIfUsed builds the base image when the project runs on it: the default image, or a
// project that names COMPOSEBOX_BASE_IMAGE.
func (o *Orchestrator) ensureBaseIfUsed(ctx context.Context, res *compose.Resolution) error {
	ref, err := imagespec.BaseRef(imagespec.DefaultBusybox)
	if err != nil {
		return nil // no busybox: projects that need the base image fail on the missing image
	}
	if res.Source == compose.SourceDefault && res.Image != ref {
		return nil
	}
	_, err = o.backend.BaseImage(ctx)
	return err
}

// samplePolicy is the task's policy for one sample: binds may also come from the directories
// composebox makes for it.
func (t *Task) samplePolicy(project string) compose.Policy {
	return t.policy.AllowingDirs(t.resolution.SampleVars(project, t.o.sampleDir(project)).DirPaths()...)
}

// taskName is the spec's name, else the one the layout or the directory gives (skipping
// generic directory names such as env or challenge), else "task".
func taskName(spec TaskSpec, res *compose.Resolution) string {
	switch {
	case spec.Name != "":
		return spec.Name
	case res.TaskName != "":
		return res.TaskName
	case res.WorkingDir != "":
		return compose.TaskNameOf(res.WorkingDir)
	}
	return "task"
}

// sampleDir is the directory composebox owns for a sample whose files bind per-sample host
// directories (a Terminal-Bench task's log paths): made before it starts, removed with it.
func (o *Orchestrator) sampleDir(project string) string {
	return SampleDir(o.cfg.stateDir, project)
}

// SampleDir is where a sample's own directory lives under a state dir (see
// tracking.SampleDir).
func SampleDir(stateDir, project string) string {
	return tracking.SampleDir(stateDir, project)
}

func (t *Task) prepareImages(ctx context.Context) error {
	roots := t.policy.TaskRoots(t.project.WorkingDir)
	plan, err := compose.PlanImagesContext(ctx, t.project, t.name, compose.PlanOptions{Roots: roots})
	if err != nil {
		return err
	}
	t.images = map[string]string{}
	lbl := map[string]string{labels.LabelManaged: "true", labels.LabelTask: t.name, labels.LabelTaskIdentity: t.identity}
	for _, b := range plan.Builds {
		svc, err := t.project.GetService(b.Service)
		if err != nil {
			return err
		}
		if t.spec.Prebuilt {
			if err := t.requireImage(ctx, b.Tag, "service "+b.Service+" (prebuilt mode: build it first)"); err != nil {
				return err
			}
		} else {
			start := time.Now()
			built, err := t.o.backend.Build(ctx, svc, backend.BuildOptions{Tag: b.Tag, Labels: lbl, Limit: t.o.buildLimit,
				Roots: roots, AllowAddURL: t.policy.AllowAddURL, HostAccess: t.policy.AllowHostAccess})
			if err != nil {
				return err
			}
			if built {
				t.emit(Event{Kind: EventImageBuilt, Task: t.name, Service: b.Service, Duration: time.Since(start)})
			}
		}
		t.images[b.Service] = b.Tag
	}
	var errs *multierror.Error
	for _, ref := range plan.Existing {
		if err := t.requireImage(ctx, ref, ""); err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	if errs.ErrorOrNil() != nil && len(errs.Errors) == 1 {
		return errs.Errors[0]
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	return t.checkImageOwners(ctx, t.project)
}

func (t *Task) requireImage(ctx context.Context, ref, why string) error {
	_, err := t.o.backend.Image(ctx, ref)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cbxerr.ErrNotFound):
		msg := fmt.Sprintf("image %s is not present locally, and composebox never pulls (no registry is assumed): build it or `docker load` it", ref)
		if why != "" {
			msg += "; needed by " + why
		}
		return cbxerr.New(cbxerr.ErrNotFound, msg)
	default:
		return fmt.Errorf("inspect image %s: %w", ref, err)
	}
}

// Cleanup removes every sample of the task, including those whose SampleInit was interrupted,
// found by labels (this task's name, this process's ownership). It owns the task's teardown:
// it first cancels the SampleInits in flight and waits for them, so that nothing they create
// afterwards escapes it, then removes every sample. Samples cannot start afterwards.
//
// It runs on a context of its own, detached from ctx and bounded by opts' Timeout (default 2
// minutes), so a cancelled ctx still cleans up. A Cleanup that failed is retried by the next
// call; after one that succeeded, calls do nothing.
func (t *Task) Cleanup(ctx context.Context, opts ...CleanupOptions) error {
	dctx, cancel := teardownContext(ctx, opts...)
	defer cancel()
	return t.cleanup(dctx)
}

// cleanup is Cleanup on a teardown context.
func (t *Task) cleanup(dctx context.Context) error {
	t.cleanupMu.Lock()
	defer t.cleanupMu.Unlock()
	if t.cleaned {
		return nil
	}
	_ = t.stopPool(dctx) // the samples it still held are the task's: removed below
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.stopLife()

	var errs *multierror.Error
	// Every SampleInit in flight was cancelled: wait until each has returned (and torn down
	// what it had started), so that the removal below sees all it created.
	starting := make(chan struct{})
	go func() { t.inflight.Wait(); close(starting) }()
	select {
	case <-starting:
	case <-dctx.Done():
		errs = multierror.Append(errs, fmt.Errorf("wait for the samples still starting: %w", dctx.Err()))
	}

	t.mu.Lock()
	samples := make([]*Sample, 0, len(t.samples))
	for _, s := range t.samples {
		samples = append(samples, s)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range samples {
		wg.Go(func() {
			if err := s.cleanup(dctx); err != nil {
				mu.Lock()
				errs = multierror.Append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Anything the map missed (a sample whose own teardown failed, or whose registration
	// raced with a crash of its caller): sweep by labels, this task's projects only.
	// The backend retries transient engine errors, which a teardown must ride out.
	projects, err := backend.OwnedProjects(dctx, t.o.backend, t.name, t.o.owner)
	if err != nil {
		errs = multierror.Append(errs, err)
	}
	t.mu.Lock()
	projects = slices.DeleteFunc(projects, func(p string) bool { return !t.projects[p] })
	t.mu.Unlock()
	for _, p := range projects {
		if _, err := t.o.down(dctx, p); err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return fmt.Errorf("cleanup task %s: %w", t.name, t.o.engineLost(err))
	}
	t.cleaned = true
	t.o.endTracking(t.name)
	t.removePrivateDir()
	return nil
}

// enter admits a SampleInit: it fails once the task is cleaned up, and otherwise returns ctx
// made to end also when Cleanup starts, and the function to call when SampleInit returns.
func (t *Task) enter(ctx context.Context) (context.Context, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, nil, cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("task %s is cleaned up", t.name))
	}
	t.inflight.Add(1)
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.life, cancel)
	return cctx, func() {
		stop()
		cancel()
		t.inflight.Done()
	}, nil
}
