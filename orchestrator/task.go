package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/errdefs"
	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images"
	"github.com/composebox/composebox/lifecycle"
)

// TaskSpec says where a task's environment comes from. Exactly one of Path, YAML and Project
// is used; with none, the task runs on the default image.
type TaskSpec struct {
	// Name names the task in labels and project names. Default: the base name of Path's
	// directory, else "task".
	Name string
	// Path is a compose file, a directory, or a Dockerfile (CONTRACT section 1).
	Path string
	// YAML is a compose project as text; relative paths in it resolve against WorkingDir.
	YAML []byte
	// Project is a compose project as a struct.
	Project *types.Project
	// WorkingDir is the directory of a YAML project (default: the current directory).
	WorkingDir string
	// Files are more compose files merged on top of Path's, like further -f flags.
	Files []string
	// Environment overrides the process environment and .env for interpolation.
	Environment map[string]string
	// Profiles activates compose profiles.
	Profiles []string
	// Prebuilt only checks that every image exists: nothing is built.
	Prebuilt bool
	// ReadyTimeout overrides the readiness budget derived from the healthchecks.
	ReadyTimeout time.Duration
}

// Task is a resolved, policed and built compose project from which samples are started. It is
// safe for concurrent use.
type Task struct {
	o          *Orchestrator
	name       string
	spec       TaskSpec
	resolution *compose.Resolution
	project    *types.Project // loaded and policed, not normalised
	apiVersion string
	// images maps each build service to the image built for it.
	images         map[string]string
	defaultService string

	mu      sync.Mutex
	samples map[string]*Sample
	// projects is every project name this task ever registered: Cleanup's sweep by labels
	// removes only these, never those of another task of the same name in this process.
	projects map[string]bool
	closed   bool
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
	info, err := o.prerequisites(ctx)
	if err != nil {
		return nil, fmt.Errorf("task init: %w", err)
	}
	if o.cfg.defaultImage == "" && spec.Path == "" && spec.YAML == nil && spec.Project == nil {
		// The default image is composebox's own base image: make sure it exists.
		if _, err := o.engine.Images().Base(ctx); err != nil {
			return nil, fmt.Errorf("task init: %w", err)
		}
	}
	res, err := o.resolve(spec)
	if err != nil {
		return nil, fmt.Errorf("task init: %w", err)
	}
	t := &Task{o: o, spec: spec, resolution: res, apiVersion: info.APIVersion, samples: map[string]*Sample{}, projects: map[string]bool{}}
	t.name = taskName(spec, res)
	if err := o.startTracking(ctx, t.name); err != nil {
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	if err := o.ensureBaseIfUsed(ctx, res); err != nil {
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	p, err := compose.Load(ctx, res, compose.LoadOptions{Environment: spec.Environment, Profiles: spec.Profiles})
	if err != nil {
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	if err := o.cfg.policy.Check(p); err != nil {
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	o.cfg.policy.ApplyDefaults(p)
	if t.defaultService, err = compose.DefaultService(p); err != nil {
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	t.project = p
	if err := t.prepareImages(ctx); err != nil {
		return nil, fmt.Errorf("task init %s: %w", t.name, err)
	}
	o.emit(Event{Kind: EventTaskReady, Task: t.name, Duration: time.Since(start)})
	return t, nil
}

func (o *Orchestrator) resolve(spec TaskSpec) (*compose.Resolution, error) {
	switch {
	case spec.Project != nil:
		return compose.FromProject(spec.Project), nil
	case spec.YAML != nil:
		wd := spec.WorkingDir
		if wd == "" {
			wd = "."
		}
		abs, err := filepath.Abs(wd)
		if err != nil {
			return nil, err
		}
		return compose.FromYAML(spec.YAML, abs), nil
	}
	return compose.Resolve(spec.Path, compose.ResolveOptions{DefaultImage: o.cfg.defaultImage, ExtraFiles: spec.Files})
}

// ensureBaseIfUsed builds the base image when the project runs on it: the default image, or a
// project that names COMPOSEBOX_BASE_IMAGE.
func (o *Orchestrator) ensureBaseIfUsed(ctx context.Context, res *compose.Resolution) error {
	ref, err := images.BaseRef(images.DefaultBusybox)
	if err != nil {
		return nil // no busybox: projects that need the base image fail on the missing image
	}
	if res.Source == compose.SourceDefault && res.Image != ref {
		return nil
	}
	_, err = o.engine.Images().Base(ctx)
	return err
}

func taskName(spec TaskSpec, res *compose.Resolution) string {
	if spec.Name != "" {
		return spec.Name
	}
	if res.WorkingDir != "" {
		if b := filepath.Base(res.WorkingDir); b != "/" && b != "." {
			return b
		}
	}
	return "task"
}

func (t *Task) prepareImages(ctx context.Context) error {
	plan, err := compose.PlanImages(t.project, t.name)
	if err != nil {
		return err
	}
	t.images = map[string]string{}
	labels := map[string]string{cleanup.LabelManaged: "true", cleanup.LabelTask: t.name}
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
			built, err := t.o.engine.Build(ctx, svc, lifecycle.BuildOptions{Tag: b.Tag, Labels: labels, Limit: t.o.buildLimit})
			if err != nil {
				return err
			}
			if built {
				t.o.emit(Event{Kind: EventImageBuilt, Task: t.name, Service: b.Service, Duration: time.Since(start)})
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
	return errs.ErrorOrNil()
}

func (t *Task) requireImage(ctx context.Context, ref, why string) error {
	_, err := t.o.engine.Client().ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return nil
	case errdefs.IsNotFound(err):
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
// found by labels (this task's name, this process's ownership). It runs on a detached context
// with a deadline, so a cancelled ctx still cleans up. Samples cannot start afterwards.
func (t *Task) Cleanup(ctx context.Context) error {
	t.mu.Lock()
	first := !t.closed
	t.closed = true
	samples := make([]*Sample, 0, len(t.samples))
	for _, s := range t.samples {
		samples = append(samples, s)
	}
	t.mu.Unlock()
	if first {
		defer t.o.endTracking(t.name)
	}
	var errs *multierror.Error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range samples {
		wg.Go(func() {
			if err := s.Cleanup(ctx); err != nil {
				mu.Lock()
				errs = multierror.Append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Anything the map missed (a sample whose registration raced with a crash of its caller):
	// sweep by labels, this task's projects only.
	dctx, cancel := teardownContext(ctx)
	defer cancel()
	// The engine's client retries transient daemon errors, which a teardown must ride out.
	c := t.o.engine.Client()
	projects, err := cleanup.ProjectsOf(dctx, c, t.name, t.o.owner)
	if err != nil {
		errs = multierror.Append(errs, err)
	}
	t.mu.Lock()
	projects = slices.DeleteFunc(projects, func(p string) bool { return !t.projects[p] })
	t.mu.Unlock()
	for _, p := range projects {
		slot, err := t.o.teardowns.acquire(dctx)
		if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("remove project %s: %w", p, err))
			continue
		}
		_, err = cleanup.RemoveProject(dctx, c, p, cleanup.RemoveOptions{})
		slot.release(neutral)
		if err != nil {
			errs = multierror.Append(errs, err)
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return fmt.Errorf("cleanup task %s: %w", t.name, err)
	}
	return nil
}

// teardownTimeout bounds a teardown that runs after its caller gave up.
const teardownTimeout = 2 * time.Minute

func teardownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
}
