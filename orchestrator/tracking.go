package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Tracking. Every resource of a sample carries the owner label of the process that created it
// (host:pid:start-time), so a fresh process can tell a crashed run's leftovers (stale) from
// live ones. On top of that:
//   - a state cache (tracking.Cache under the state dir) records held tasks and live samples;
//   - WithSweepStale removes stale projects of a task's name at TaskInit;
//   - WithReaper starts a watchdog process that removes this process's projects if it dies
//     without cleaning up;
//   - Sample.Detach hands a sample over, as `composebox up` does once it is ready.

// WithReaper starts, at the first TaskInit, a watchdog process that removes this process's
// projects within seconds of its death if it dies without cleaning them up (kill -9, a crash,
// an os.Exit). The watchdog is this program's own executable, re-run in its own session with
// its standard streams on /dev/null; it is not a container, needs no socket mount, and only
// ever removes projects whose owner label is exactly this process's. A process starts at most
// one watchdog, however many orchestrators it makes.
//
// The program's main must call ReaperMain first thing (a test binary: its TestMain), which runs
// the watchdog in the re-executed copy; without that call TaskInit fails with ErrPrerequisite.
// A program whose samples run elsewhere than on Docker engines (WithBackend of a Kubernetes
// backend) calls backends.ReaperMain (orchestrator/backends) instead, whose watchdog rebuilds
// the backend from its description and removes the dead process's samples through it. The
// watchdog works by re-executing os.Executable(): a program that clears its environment or
// whose executable is replaced on disk gets no watchdog.
func WithReaper() Option {
	return func(c *config) error { c.reaper = true; return nil }
}

// WithSweepStale removes, at each TaskInit, the stale projects of the task's name: those whose
// owner process is dead. Detached samples and samples of live processes are left alone. A
// failed sweep is logged, and does not fail TaskInit.
func WithSweepStale() Option {
	return func(c *config) error { c.sweepStale = true; return nil }
}

// startTracking runs once per TaskInit, before anything is created: the reaper's start, the
// task hold in the state cache, and the stale sweep of the task's name, when configured.
func (o *Orchestrator) startTracking(ctx context.Context, task string) error {
	if o.cfg.reaper {
		d, err := o.describe()
		if err != nil {
			return fmt.Errorf("start reaper: %w", err)
		}
		if err := tracking.StartReaper(ctx, o.owner, o.cfg.stateDir, d); err != nil {
			return err
		}
	}
	holdTask(o.cfg.stateDir, task)
	if err := o.cache().PutTask(tracking.TaskRecord{Task: task, Owner: o.owner, Created: time.Now().UTC()}); err != nil {
		o.cfg.log.Warn("state cache: record task", "task", task, "err", err)
	}
	if o.cfg.sweepStale {
		res, err := o.sweep(ctx, backend.Selector{Stale: true, Task: task}, backend.RemoveOptions{})
		for _, r := range res {
			if r.Err == nil {
				o.cfg.log.Info("removed stale project", "project", r.Name, "owner", r.Owner)
			}
		}
		if err != nil {
			o.cfg.log.Warn("sweep stale projects", "task", task, "err", err)
		}
	}
	return nil
}

// describe says how the watchdog makes this orchestrator's backend again: a backend that
// describes itself (Docker's, several engines', a cluster's) as it says, any other by its kind
// (and a Docker one by its endpoint).
func (o *Orchestrator) describe() (backend.Description, error) {
	d, err := o.describeBackend()
	d.HostReaper = backend.CapabilitiesOf(o.backend).HostReaper
	return d, err
}

func (o *Orchestrator) describeBackend() (backend.Description, error) {
	if ds, ok := o.backend.(backend.Describer); ok {
		return ds.Describe()
	}
	d := backend.Description{Kind: o.backend.Kind()}
	if d.Kind == "docker" {
		d.Endpoint = o.backend.Endpoint()
	}
	return d, nil
}

// endTracking forgets this process's hold on task once its last Task of that name is cleaned
// up, so that image hygiene may remove the task's images.
func (o *Orchestrator) endTracking(task string) {
	if releaseTask(o.cfg.stateDir, task) {
		if err := o.cache().DeleteTask(task, o.owner); err != nil {
			o.cfg.log.Warn("state cache: forget task", "task", task, "err", err)
		}
	}
}

// track records a sample in the state cache before its project is created. The cache is only a
// cache: a failure to write it is logged, and does not fail the sample.
func (o *Orchestrator) track(s *Sample) error {
	r := tracking.SampleRecord{
		Project: s.project, Task: s.task.name, Sample: s.id, Owner: o.owner,
		Config: configOf(s.task.resolution), Created: s.created.UTC(),
	}
	if err := o.cache().PutSample(r); err != nil {
		o.cfg.log.Warn("state cache: record sample", "project", s.project, "err", err)
	}
	return nil
}

func (o *Orchestrator) cache() *tracking.Cache { return tracking.OpenCache(o.cfg.stateDir) }

// Detach hands the sample over, as `composebox up` does once its sample is ready: the sample
// stops being this process's, so it is never stale, neither the reaper nor Task.Cleanup
// removes it, and only an explicit removal does (Sample.Cleanup, `composebox down`,
// `composebox cleanup PROJECT` or `cleanup --all`). Engine labels cannot change, so the hand
// over is a marker volume in the project (tracking.MarkDetached). It is idempotent.
func (s *Sample) Detach(ctx context.Context) error {
	o := s.o
	task, config := "", ""
	if s.task != nil {
		task, config = s.task.name, configOf(s.task.resolution)
	}
	// The take's own record comes first, or it would overwrite the state cache's record below.
	s.settled(ctx)
	d, ok := backend.AsDetacher(o.backend)
	if !ok {
		return backend.Lacks("detach sample "+s.id, o.backend, "backend.Detacher")
	}
	if err := d.MarkDetached(ctx, backend.Marker{Project: s.project, Task: task, Sample: s.id}); err != nil {
		return fmt.Errorf("detach sample %s: %w", s.id, err)
	}
	if s.task != nil {
		s.task.unregister(s)
	}
	r := tracking.SampleRecord{
		Project: s.project, Task: task, Sample: s.id, Owner: labels.OwnerDetached,
		Config: config, Created: s.created.UTC(),
	}
	if err := o.cache().PutSample(r); err != nil {
		o.cfg.log.Warn("state cache: record sample", "project", s.project, "err", err)
	}
	s.emit(Event{Kind: EventSampleDetached, Task: task, Sample: s.id, Project: s.project})
	return nil
}

// EventSampleDetached: Sample.Detach handed the sample over.
const EventSampleDetached EventKind = "sample_detached"

// configOf names a task's config for the state cache.
func configOf(res *compose.Resolution) string {
	switch {
	case res == nil:
		return ""
	case len(res.Files) > 0:
		return strings.Join(res.Files, ",")
	case res.Dockerfile != "":
		return res.Dockerfile
	case res.Source == compose.SourceDefault:
		return "image " + res.Image
	default:
		return string(res.Source)
	}
}

// Task holds, counted per state dir and task name: the state cache's record is per process, and
// a process may hold one task name through several Tasks.
var (
	holdsMu sync.Mutex
	holds   = map[[2]string]int{}
)

func holdTask(dir, task string) {
	holdsMu.Lock()
	holds[[2]string{dir, task}]++
	holdsMu.Unlock()
}

// releaseTask reports whether that was the last hold.
func releaseTask(dir, task string) bool {
	holdsMu.Lock()
	defer holdsMu.Unlock()
	k := [2]string{dir, task}
	if holds[k] == 0 {
		return false
	}
	holds[k]--
	if holds[k] > 0 {
		return false
	}
	delete(holds, k)
	return true
}
