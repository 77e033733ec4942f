package orchestrator

import (
	"context"
	"fmt"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Snapshot is a sample's recorded filesystem state: every service's filesystem changes and
// every named volume's content at one moment. It belongs to its sample, and is removed with it.
// Processes are not recorded: a sample reset to a snapshot, or started from one, runs its
// services afresh.
type Snapshot struct {
	sample *Sample
	state  backend.State
}

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
func (s *Sample) Snapshot(ctx context.Context, name string) (*Snapshot, error) {
	fk, err := s.o.forker("snapshot")
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.project, err)
	}
	if old, ok := s.states.get(name); ok {
		// Committing again under the same tag would leave the old image untagged, never removed.
		if err := fk.RemoveState(ctx, old); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", s.project, err)
		}
	}
	st, err := fk.Snapshot(ctx, backend.SnapshotRequest{Project: s.project, Name: name, Owner: s.project})
	if err != nil {
		return nil, s.o.engineLost(err)
	}
	s.states.put(st)
	return &Snapshot{sample: s, state: st}, nil
}

// SampleFrom starts a new sample of the task from a snapshot of one of its samples: the
// snapshot's files and volumes, in networks of its own, with its services' processes started
// afresh and waited for as SampleInit does. The snapshot stays its sample's.
func (t *Task) SampleFrom(ctx context.Context, sn *Snapshot, spec SampleSpec) (*Sample, error) {
	if sn == nil || sn.sample == nil || sn.sample.task != t {
		return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("sample from snapshot: the snapshot is not of a sample of task %s", t.name))
	}
	if _, ok := sn.sample.states.get(sn.state.Name); !ok {
		return nil, cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("sample from snapshot %s of %s: it was removed with its sample", sn.state.Name, sn.state.Project))
	}
	st := sn.state
	spec.from = &st
	return t.startSample(ctx, spec, nil)
}
