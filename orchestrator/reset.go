package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Reset brings the sample back to its snapshot name: its containers are replaced by ones
// running the recorded filesystems, its named volumes get the recorded content again, and its
// services start afresh and are waited for. The project and its networks stay (with their
// firewall rules), which makes a reset cheaper than a new sample.
//
// The sample's sandboxes are new afterwards: take them again from the sample (Default,
// Sandbox); a command in flight on the old containers fails. Reset must not run concurrently
// with other calls on the same sample.
func (s *Sample) Reset(ctx context.Context, name string) error {
	fk, err := s.o.forker("reset")
	if err != nil {
		return fmt.Errorf("reset %s: %w", s.project, err)
	}
	st, ok := s.states.get(name)
	if !ok && s.task != nil {
		st, ok = s.task.keptState(s.project, name)
	}
	if !ok {
		// Taken by another process (composebox snapshot), it is found by its tags and labels.
		found, err := fk.FindState(ctx, s.project, name)
		if err != nil {
			return fmt.Errorf("reset %s: %w", s.project, s.o.engineLost(err))
		}
		st = found
	}
	if s.task == nil || s.proj == nil {
		return cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("reset %s: a sample opened by project name cannot be reset; reset it where its task was loaded", s.project))
	}
	t := s.task
	if err := fk.RemoveContainers(ctx, s.project); err != nil {
		return fmt.Errorf("reset %s: %w", s.project, s.o.engineLost(err))
	}
	p := s.proj
	if err := fk.Restore(ctx, st, p); err != nil {
		return fmt.Errorf("reset %s: %w", s.project, s.o.engineLost(err))
	}
	wait := backend.WaitOptions{Timeout: t.spec.ReadyTimeout}
	if err := s.o.backend.Up(ctx, p, backend.UpOptions{Wait: wait, HostAccess: t.policy.AllowHostAccess, HostRoutes: t.policy.AllowHostRoutes}); err != nil {
		return fmt.Errorf("reset %s: %w", s.project, s.o.engineLost(err))
	}
	states, err := s.o.backend.Wait(ctx, p, wait)
	if err != nil {
		return fmt.Errorf("reset %s: %w", s.project, s.o.engineLost(err))
	}
	return s.adopt(states)
}

// adopt makes the sample's sandboxes those of states, the default service first.
func (s *Sample) adopt(states []backend.ServiceState) error {
	order, err := compose.ServiceOrder(s.proj)
	if err != nil {
		return err
	}
	byName := map[string]backend.ServiceState{}
	for _, st := range states {
		byName[st.Service] = st
	}
	var sbs []*Sandbox
	s.stopped = nil
	for _, name := range order {
		st, ok := byName[name]
		if !ok {
			continue
		}
		if st.State != "running" {
			s.markStopped(name, backend.Diagnosis{Container: st.ContainerID, Name: st.Container, Status: st.State, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, LogTail: st.Logs})
			continue
		}
		sbs = append(sbs, s.o.newSandbox(s, name, st.ContainerID, st.Container, st.WorkingDir, st.User, name == s.task.defaultService))
	}
	if len(sbs) == 0 || !sbs[0].isDefault {
		return cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("reset %s: default service %s is not running", s.project, cmp.Or(s.task.defaultService, "?")))
	}
	s.sandboxes = sbs
	return nil
}

// Snapshot records the state of project, a live sample of this task that any process started
// (composebox up), as Sample.Snapshot does; Reset takes it back there from any process.
func (t *Task) Snapshot(ctx context.Context, project, name string, opts ...SnapshotOptions) (*Snapshot, error) {
	s, err := t.adoptProject(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", project, err)
	}
	return s.Snapshot(ctx, name, opts...)
}

// FindSnapshot is the snapshot name of project, a live sample of this task, that any process
// took (composebox snapshot): a warm pool can be filled from it (PrewarmOptions.From), and
// SampleFrom start samples from it, while project keeps it.
func (t *Task) FindSnapshot(ctx context.Context, project, name string) (*Snapshot, error) {
	fk, err := t.o.forker("snapshot")
	if err != nil {
		return nil, fmt.Errorf("find snapshot %s of %s: %w", name, project, err)
	}
	s, err := t.adoptProject(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("find snapshot %s of %s: %w", name, project, err)
	}
	st, err := fk.FindState(ctx, project, name)
	if err != nil {
		return nil, fmt.Errorf("find snapshot %s of %s: %w", name, project, t.o.engineLost(err))
	}
	s.states.put(st)
	return &Snapshot{sample: s, state: st}, nil
}

// Reset brings project, a live sample of this task that any process started, back to its
// snapshot name, which any process took, as Sample.Reset does.
func (t *Task) Reset(ctx context.Context, project, name string) error {
	s, err := t.adoptProject(ctx, project)
	if err != nil {
		return fmt.Errorf("reset %s: %w", project, err)
	}
	return s.Reset(ctx, name)
}

// adoptProject is the live sample project of this task as a Sample of it, its project loaded
// again as the task's sample of that name and id.
func (t *Task) adoptProject(ctx context.Context, project string) (*Sample, error) {
	ctrs, err := t.o.backend.Containers(ctx, append(labels.ProjectSelector(project), labels.LabelTask+"="+t.name), true)
	if err != nil {
		return nil, t.o.engineLost(err)
	}
	if len(ctrs) == 0 {
		return nil, cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("no sample of task %s has that project name", t.name))
	}
	s := &Sample{o: t.o, task: t, project: project, id: ctrs[0].Labels[labels.LabelSample], engine: ctrs[0].Engine, created: time.Now(), calls: newCalls()}
	if c, err := time.Parse(time.RFC3339, ctrs[0].Labels[labels.LabelCreated]); err == nil {
		s.created = c
	}
	p, err := t.sampleProject(ctx, s, SampleSpec{ID: s.id})
	if err != nil {
		return nil, err
	}
	s.proj = p
	return s, nil
}
