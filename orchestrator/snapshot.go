package orchestrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Snapshot is a sample's recorded filesystem state: every service's filesystem changes and
// every named volume's content at one moment. It belongs to its sample, and is removed with it,
// unless the task keeps it (SnapshotOptions.KeepWithTask), which removes it at Task.Cleanup.
// What it committed stays as long as a sample started from it lives (each such sample tags the
// images it runs and has its own copy of the volumes), and goes with the last of them.
// Processes are not recorded: a sample reset to a snapshot, or started from one, runs its
// services afresh.
type Snapshot struct {
	sample *Sample
	// task is set when the task keeps the snapshot, under a project name of its own (the
	// state's Owner), which has nothing but the snapshot.
	task  *Task
	state backend.State
}

// SnapshotOptions configures Sample.Snapshot. The zero value is a snapshot its sample owns.
type SnapshotOptions struct {
	// KeepWithTask makes the snapshot the task's rather than the sample's: it outlives its
	// sample, and goes with Task.Cleanup (or with a crash of this process, by `composebox
	// cleanup --stale`). Task.SampleFrom and a warm pool (PrewarmOptions.From) start samples
	// from it after its sample is gone.
	KeepWithTask bool
}

// KeptByTask reports whether the task, not the sample, owns the snapshot.
func (sn *Snapshot) KeptByTask() bool { return sn.task != nil }

// Name is the snapshot's name; Project the project of the sample it records.
func (sn *Snapshot) Name() string    { return sn.state.Name }
func (sn *Snapshot) Project() string { return sn.state.Project }

// sampleStates are a sample's snapshots by name.
type sampleStates struct {
	mu sync.Mutex
	m  map[string]backend.State
}

func (ss *sampleStates) get(name string) (backend.State, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st, ok := ss.m[name]
	return st, ok
}

func (ss *sampleStates) put(st backend.State) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]backend.State{}
	}
	ss.m[st.Name] = st
}

// clear forgets every snapshot: they went with their sample.
func (ss *sampleStates) clear() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.m = nil
}

// forker is the backend's Forker, or the UnsupportedError of op.
func (o *Orchestrator) forker(op string) (backend.Forker, error) {
	fk, ok := backend.AsForker(o.backend)
	if !ok {
		return nil, backend.Unsupported(op, o.backend)
	}
	// Over several engines each verb runs on the sample's engine, which must itself fork.
	if c, ok := o.backend.(interface{ ForkCheck(op string) error }); ok {
		if err := c.ForkCheck(op); err != nil {
			return nil, err
		}
	}
	return fk, nil
}

// restore prepares a sample's project to start from st (see backend.Forker.Restore).
func (o *Orchestrator) restore(ctx context.Context, st backend.State, p *types.Project) error {
	fk, err := o.forker("restore")
	if err != nil {
		return err
	}
	return fk.Restore(ctx, st, p)
}

// Snapshot records the sample's state under name: every container of the sample is paused for
// the cut (a few hundred milliseconds plus the copy of its named volumes), each service's
// container is committed and each named volume copied, then the sample runs on, untouched. A
// snapshot of the same name replaces the earlier one. Reset brings the sample back to it, and
// Task.SampleFrom starts new samples from it.
func (s *Sample) Snapshot(ctx context.Context, name string, opts ...SnapshotOptions) (*Snapshot, error) {
	fk, err := s.o.forker("snapshot")
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.project, err)
	}
	var opt SnapshotOptions
	if len(opts) > 0 {
		opt = opts[len(opts)-1]
	}
	if opt.KeepWithTask {
		return s.snapshotForTask(ctx, fk, name)
	}
	if old, ok := s.states.get(name); ok {
		// Committing again under the same tag would leave the old image untagged, never removed.
		if err := fk.RemoveState(ctx, old); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", s.project, err)
		}
	}
	st, err := fk.Snapshot(ctx, s.snapshotRequest(name, s.project))
	if err != nil {
		return nil, s.o.engineLost(err)
	}
	s.states.put(st)
	return &Snapshot{sample: s, state: st}, nil
}

// snapshotRequest asks for the sample's state name for owner, labelled with this process and
// the task.
func (s *Sample) snapshotRequest(name, owner string) backend.SnapshotRequest {
	req := backend.SnapshotRequest{Project: s.project, Name: name, Owner: owner, Process: s.o.owner, Created: time.Now()}
	if s.task != nil {
		req.Task = s.task.name
	}
	return req
}

// snapshotForTask records the sample's state for its task: under a project name of the task's
// own, which Task.Cleanup removes.
func (s *Sample) snapshotForTask(ctx context.Context, fk backend.Forker, name string) (*Snapshot, error) {
	t := s.task
	if t == nil {
		return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("snapshot %s: a sample opened by project name has no task to keep its snapshot", s.project))
	}
	holder, ctx, leave, err := t.keeper(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.project, err)
	}
	defer leave()
	st, err := fk.Snapshot(ctx, s.snapshotRequest(name, holder))
	if err != nil {
		return nil, s.o.engineLost(err)
	}
	t.keep(st)
	return &Snapshot{sample: s, task: t, state: st}, nil
}

// keeper registers a new project name for a snapshot the task keeps, so that Task.Cleanup's
// sweep by labels removes it (its record volume carries the task's and this process's labels).
// The recording is admitted as a SampleInit is (see enter): a Task.Cleanup that starts meanwhile
// cancels it and waits for it, so that its sweep sees what it made. Call leave once it is done.
func (t *Task) keeper(ctx context.Context) (holder string, _ context.Context, leave func(), _ error) {
	ctx, leave, err := t.enter(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	holder = compose.ProjectName(t.name, compose.NewSampleID())
	t.mu.Lock()
	t.projects[holder] = true
	t.mu.Unlock()
	return holder, ctx, leave, nil
}

// keep records a state the task keeps; keeps reports whether it still does, and keptState
// finds the newest one of project by name.
func (t *Task) keep(st backend.State) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kept == nil {
		t.kept = map[string]backend.State{}
		t.keptByName = map[[2]string]backend.State{}
	}
	t.kept[st.Owner] = st
	t.keptByName[[2]string{st.Project, st.Name}] = st
}

func (t *Task) keeps(owner string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.kept[owner]
	return ok && !t.closed
}

func (t *Task) keptState(project, name string) (backend.State, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.keptByName[[2]string{project, name}]
	return st, ok && !t.closed
}

// keepCopy makes the task's own copy of sn, a snapshot its sample owns, for a warm pool that
// must outlive that sample.
func (t *Task) keepCopy(ctx context.Context, sn *Snapshot) (backend.State, error) {
	fk, err := t.o.forker("snapshot")
	if err != nil {
		return backend.State{}, err
	}
	holder, ctx, leave, err := t.keeper(ctx)
	if err != nil {
		return backend.State{}, err
	}
	defer leave()
	st, err := fk.CopyState(ctx, sn.state, backend.SnapshotRequest{Name: sn.state.Name, Owner: holder, Task: t.name, Process: t.o.owner, Created: time.Now()})
	if err != nil {
		return backend.State{}, t.o.engineLost(err)
	}
	t.keep(st)
	return st, nil
}

// SampleFrom starts a new sample of the task from a snapshot of one of its samples: the
// snapshot's files and volumes, in networks of its own, with its services' processes started
// afresh and waited for as SampleInit does. The snapshot stays its sample's.
func (t *Task) SampleFrom(ctx context.Context, sn *Snapshot, spec SampleSpec) (*Sample, error) {
	if err := t.checkSnapshot("sample from snapshot", sn); err != nil {
		return nil, err
	}
	st := sn.state
	spec.from = &st
	// A pool filling from this snapshot (or, with TakeShared, another process's) may hold one.
	if s := t.takeWarm(ctx, spec); s != nil {
		return s, nil
	}
	return t.startSample(ctx, spec, nil)
}

// checkSnapshot says why sn cannot start samples of t: not a snapshot of t's, or removed.
func (t *Task) checkSnapshot(op string, sn *Snapshot) error {
	if sn == nil || sn.sample == nil || sn.sample.task != t {
		return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("%s: the snapshot is not of a sample of task %s", op, t.name))
	}
	if sn.task != nil {
		if !t.keeps(sn.state.Owner) {
			return cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("%s %s of %s: it was removed with its task", op, sn.state.Name, sn.state.Project))
		}
		return nil
	}
	if _, ok := sn.sample.states.get(sn.state.Name); !ok {
		return cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("%s %s of %s: it was removed with its sample", op, sn.state.Name, sn.state.Project))
	}
	return nil
}
