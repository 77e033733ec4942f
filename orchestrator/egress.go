package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/compose"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// EgressState is a sample's allowlist and the attempts its gateway refused.
type EgressState = backend.EgressState

// EgressDenial is one lookup or connection a sample's gateway refused (egress_denied).
type EgressDenial = backend.EgressDenial

func (o *Orchestrator) egressBackend(project string) (backend.Egress, error) {
	b, ok := backend.AsEgress(o.backend)
	if !ok {
		return nil, cbxerr.New(cbxerr.ErrPrerequisite, fmt.Sprintf("egress of %s: the %s backend has no egress allowlists", project, o.backend.Kind()))
	}
	return b, nil
}

// Egress reads a sample's allowlist and its egress_denied attempts, by project name.
func (o *Orchestrator) Egress(ctx context.Context, project string) (EgressState, error) {
	b, err := o.egressBackend(project)
	if err != nil {
		return EgressState{}, err
	}
	return b.Egress(ctx, project)
}

// SetEgress replaces the allowlist (NAME[:PORT]) of every service of a live sample, by project
// name: a runner opens a package index for setup and closes it for the agent. The list stays
// within the --egress the sample's task started with: a name beyond it is a *compose.PolicyError
// naming the flag that would allow it, and nothing changes.
func (o *Orchestrator) SetEgress(ctx context.Context, project string, allow []string) error {
	b, err := o.egressBackend(project)
	if err != nil {
		return err
	}
	op := "set egress of " + project
	st, err := b.Egress(ctx, project)
	if err != nil {
		return err
	}
	beyond, err := compose.EgressBeyond("allow", allow, st.Ceiling)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(beyond) > 0 {
		return &compose.PolicyError{Op: op, Violations: beyond}
	}
	return b.SetEgress(ctx, project, allow)
}

// SetEgress replaces the allowlist of every service of the sample (see Orchestrator.SetEgress).
func (s *Sample) SetEgress(ctx context.Context, allow ...string) error {
	return s.o.SetEgress(ctx, s.project, allow)
}

// Egress reads the sample's allowlist and its denials.
func (s *Sample) Egress(ctx context.Context) (EgressState, error) {
	return s.o.Egress(ctx, s.project)
}

// watchEgress follows the denials of a sample that has an egress gateway (a service of p with
// an allowlist) and emits each as egress_denied, until Cleanup or the task's Cleanup. A
// backend that cannot follow them (no backend.EgressWatcher) leaves them to Egress.
func (s *Sample) watchEgress(p *types.Project) {
	w, ok := s.o.backend.(backend.EgressWatcher)
	if !ok || s.task == nil || !restricted(p) {
		return
	}
	ctx, cancel := context.WithCancel(s.task.life)
	s.stopWatch = cancel
	s.watching.Add(1)
	go func() {
		defer s.watching.Done()
		defer cancel()
		// A gateway's log ends when its container stops or is recreated (Reset): follow it
		// again, from the start, skipping the denials already reported.
		var last time.Time
		backoff := time.Second
		for ctx.Err() == nil {
			err := w.WatchEgress(ctx, s.project, func(d EgressDenial) {
				if !d.Time.After(last) {
					return
				}
				last = d.Time
				s.emit(Event{Kind: EventEgressDenied, Time: d.Time, Task: s.task.name, Sample: s.id, Project: s.project,
					Service: d.Service, Message: denialMessage(d), Denial: &d})
			})
			if err != nil && ctx.Err() == nil {
				s.o.cfg.log.Debug("follow the egress gateway's denials", "project", s.project, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}()
}

// unwatchEgress stops watchEgress and waits for it, so that no egress_denied follows
// sample_removed.
func (s *Sample) unwatchEgress() {
	if s.stopWatch != nil {
		s.stopWatch()
		s.watching.Wait()
	}
}

// restricted says whether a service of p has an egress allowlist, and so a gateway (one on
// network_mode none has none: it reaches nothing already).
func restricted(p *types.Project) bool {
	for _, svc := range p.Services {
		if _, ok := compose.EgressOf(svc); ok && svc.NetworkMode != "none" {
			return true
		}
	}
	return false
}

// denialMessage says what a denial refused, in a sentence.
func denialMessage(d EgressDenial) string {
	what := d.Name
	if what == "" {
		what = d.Address
	}
	if d.Port != 0 && d.Protocol != "dns" {
		what = fmt.Sprintf("%s port %d", what, d.Port)
	}
	return fmt.Sprintf("%s %s refused: %s", d.Protocol, what, d.Reason)
}
