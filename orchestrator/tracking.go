package orchestrator

import "context"

// Tracking hooks: issue #6 fills these in (state file, reaper, stale sweep, detach).

// startTracking runs once per TaskInit, before anything is created: the stale sweep of the
// task's name and the reaper's start, when configured.
func (o *Orchestrator) startTracking(ctx context.Context, task string) error { return nil }

// track records a sample in the state cache before its project is created.
func (o *Orchestrator) track(s *Sample) error { return nil }

// untrack forgets a sample whose project was removed.
func (o *Orchestrator) untrack(s *Sample) {}
