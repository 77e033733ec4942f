package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

// Forker is a backend that can record a live sample's filesystem state and start samples
// from it: fork, snapshot and reset. It is optional; the orchestrator finds it with a type
// assertion, and a backend without it makes those verbs fail with an UnsupportedError.
//
// State is files only: every service's filesystem changes and every named volume's content.
// Processes are not carried; a sample started from a state starts its services afresh.
type Forker interface {
	// Snapshot records project's state at one moment: every container of the project is
	// paused for the cut, each service's container is committed and each named volume copied,
	// then the containers run on. What it makes belongs to req.Owner (a project), and goes
	// with that project's Down, or with RemoveState.
	Snapshot(ctx context.Context, req SnapshotRequest) (State, error)
	// Restore prepares target, a normalised project not started yet (or whose containers
	// RemoveContainers removed), to start from st: each service st holds runs its recorded
	// image (target is rewritten in place) and each named volume st holds is created afresh
	// with the recorded content. What it makes belongs to target's project.
	Restore(ctx context.Context, st State, target *types.Project) error
	// RemoveContainers removes the project's containers and nothing else: a reset keeps the
	// project's networks.
	RemoveContainers(ctx context.Context, project string) error
	// RemoveState removes what Snapshot made for st; a state already gone is not an error.
	RemoveState(ctx context.Context, st State) error
	// FindState finds the state name of owner that some process recorded; none is
	// ErrNotFound.
	FindState(ctx context.Context, owner, name string) (State, error)
	// CopyState records st again for req.Owner under req.Name (req.Project is ignored): the
	// same committed files, and copies of its volumes, which then live as long as req.Owner
	// whatever becomes of st. A warm pool filled from a sample's snapshot keeps such a copy.
	CopyState(ctx context.Context, st State, req SnapshotRequest) (State, error)
}

// SnapshotRequest says what to record and for whom.
type SnapshotRequest struct {
	// Project is the live project whose state is recorded.
	Project string
	// Name names the state among its owner's; [a-z0-9_.-], at most 40 characters.
	Name string
	// Owner is the project the state belongs to: it is removed with that project.
	Owner string
	// Task, Process (the owner value of the process recording it, see labels.SelfOwner) and
	// Created label what the state makes, so that a cleanup finds what a process that died
	// before its owner project existed left behind, and can tell whether it is stale.
	Task, Process string
	Created       time.Time
}

// State is a recorded filesystem state of a project.
type State struct {
	Name, Owner, Project string
	// Images maps each service to the image its container was committed to.
	Images map[string]string
	// Volumes maps each named volume's key in the project to the volume holding its copy; the
	// key "" is, for a state whose owner is not the project it was taken from, an empty volume
	// recording the owner (whose only resources are the state's).
	Volumes map[string]string
}

// UnsupportedError is a verb the backend cannot do. It is errors.Is(err,
// errors.ErrUnsupported).
type UnsupportedError struct {
	// Op is the verb (fork, snapshot, reset); Backend the backend's kind; Reason why.
	Op, Backend, Reason string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: not supported by the %s backend: %s", e.Op, e.Backend, e.Reason)
}

func (e *UnsupportedError) Unwrap() error { return errors.ErrUnsupported }

// Unsupported is the UnsupportedError of a fork, snapshot or reset (op) on b: b's own reason
// when it gives one (Explainer), else that it has no Forker.
func Unsupported(op string, b Engine) error {
	reason := "it cannot record a sample's filesystem state"
	if r, ok := b.(Explainer); ok {
		reason = r.UnsupportedReason(op)
	}
	return &UnsupportedError{Op: op, Backend: b.Kind(), Reason: reason}
}
