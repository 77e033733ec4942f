package orchestrator

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Fork starts n new samples of the sample's task, each a copy of the sample at one moment:
// every service's filesystem changes and every named volume's content, the same services,
// environment, working directories and published-port rules, in networks of their own where
// each service's name resolves to the fork's own container. The sample is paused only for the
// cut (see Snapshot) and otherwise untouched.
//
// Processes are not copied: each fork starts its services afresh, and is waited for as
// SampleInit waits. Forks are ordinary samples of the task: Cleanup, Task.Cleanup, ls, down and
// cleanup apply to them. The cut is copied once, and the forks start in parallel; if one fails,
// the others are removed and the error says why.
func (s *Sample) Fork(ctx context.Context, n int) ([]*Sample, error) {
	if s.task == nil {
		return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("fork %s: a sample opened by project name has no task to start forks of; use Task.Fork with its task", s.project))
	}
	return s.task.fork(ctx, s.project, n)
}

// Fork forks the live sample of this task whose project is project, as Sample.Fork does: one
// another process started (composebox up), say. The project must be a sample of a task of the
// same name; the forks are this task's samples.
func (t *Task) Fork(ctx context.Context, project string, n int) ([]*Sample, error) {
	ctrs, err := t.o.backend.Containers(ctx, append(labels.ProjectSelector(project), labels.LabelTask+"="+t.name), false)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", project, t.o.engineLost(err))
	}
	if len(ctrs) == 0 {
		return nil, cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("fork %s: no running sample of task %s has that project name", project, t.name))
	}
	return t.fork(ctx, project, n)
}

func (t *Task) fork(ctx context.Context, project string, n int) ([]*Sample, error) {
	if n < 1 {
		return nil, cbxerr.New(cbxerr.ErrInvalidConfig, fmt.Sprintf("fork %s: the number of forks must be at least 1, got %d", project, n))
	}
	fk, err := t.o.forker("fork")
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", project, err)
	}
	st, err := fk.Snapshot(ctx, backend.SnapshotRequest{Project: project, Name: "fork." + compose.NewSampleID(), Owner: project})
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", project, t.o.engineLost(err))
	}
	// The cut is the forks' alone: each fork tags the images it runs, and has its own copy of
	// the volumes, so the cut goes once they started.
	defer func() {
		dctx, cancel := teardownContext(ctx)
		defer cancel()
		if rerr := fk.RemoveState(dctx, st); rerr != nil {
			t.o.cfg.log.Warn("remove the cut of a fork", "project", project, "err", rerr)
		}
	}()
	forks := make([]*Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forks[i], errs[i] = t.startSample(ctx, SampleSpec{from: &st}, nil)
		}()
	}
	wg.Wait()
	var failed *multierror.Error
	for _, err := range errs {
		if err != nil {
			failed = multierror.Append(failed, err)
		}
	}
	if failed == nil {
		return forks, nil
	}
	for _, f := range forks {
		if f != nil {
			if cerr := f.Cleanup(ctx); cerr != nil {
				failed = multierror.Append(failed, cerr)
			}
		}
	}
	return nil, fmt.Errorf("fork %s: %w", project, failed.ErrorOrNil())
}
