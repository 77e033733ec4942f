// Package errdefs holds composebox's error categories. Every error the library returns that a
// caller may want to branch on matches exactly one of these sentinels with errors.Is; the public
// packages re-export them (orchestrator.ErrNotFound and so on).
package errdefs

import (
	"context"
	"errors"
	"io/fs"
)

// category is a sentinel that can also stand for a standard library error, so that
// errors.Is(ErrNotFound, fs.ErrNotExist) holds.
type category struct {
	kind string
	msg  string
	base error
}

func (c *category) Error() string { return c.msg }
func (c *category) Unwrap() error { return c.base }

// Kind is the machine-readable name the CLI prints and puts in its JSON errors.
func (c *category) Kind() string { return c.kind }

var (
	ErrInvalidConfig   = &category{kind: "invalid_config", msg: "invalid config"}
	ErrPolicyViolation = &category{kind: "policy_violation", msg: "policy violation"}
	ErrPrerequisite    = &category{kind: "prerequisite", msg: "prerequisite not met"}
	ErrNotFound        = &category{kind: "not_found", msg: "not found", base: fs.ErrNotExist}
	ErrIsDirectory     = &category{kind: "is_a_directory", msg: "is a directory"}
	ErrPermission      = &category{kind: "permission_denied", msg: "permission denied", base: fs.ErrPermission}
	ErrTimeout         = &category{kind: "timeout", msg: "timed out", base: context.DeadlineExceeded}
	ErrOutputLimit     = &category{kind: "output_limit", msg: "output limit exceeded"}
	ErrUnavailable     = &category{kind: "unavailable", msg: "unavailable"}
	ErrConflict        = &category{kind: "conflict", msg: "conflict"}
	// ErrBuildFailed is a build of a task's image that the engine ran and that failed at one of
	// the Dockerfile's steps: the task's fault, not composebox's. Its errors are *BuildError.
	ErrBuildFailed = &category{kind: "build_failed", msg: "build failed"}
)

// ordered from most to least specific, so that an error wrapping two categories reports the
// one a user can act on.
var all = []*category{
	ErrPolicyViolation, ErrInvalidConfig, ErrPrerequisite, ErrTimeout, ErrOutputLimit,
	ErrBuildFailed, ErrIsDirectory, ErrPermission, ErrNotFound, ErrUnavailable, ErrConflict,
}

// Kind names the category of err for the CLI and JSON output: the kind of its category, or
// "internal" when err matches none.
func Kind(err error) string {
	for _, c := range all {
		if errors.Is(err, c) {
			return c.kind
		}
	}
	return "internal"
}

// Error is an error in a category with a message of its own. Is matches both the category and
// whatever Cause matches, so errors.Is(err, ErrNotFound) and errors.Is(err, someEngineErr) both
// work on one value.
type Error struct {
	Category error
	Msg      string
	Cause    error
}

func (e *Error) Error() string {
	switch {
	case e.Msg == "" && e.Cause != nil:
		return e.Cause.Error()
	case e.Cause == nil:
		return e.Msg
	default:
		return e.Msg + ": " + e.Cause.Error()
	}
}

func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Category}
	}
	return []error{e.Category, e.Cause}
}

// New returns an error in category cat. Msg should read "operation target: problem".
func New(cat error, msg string) error { return &Error{Category: cat, Msg: msg} }

// Wrap returns an error in category cat that keeps cause reachable with errors.Is/As.
func Wrap(cat error, cause error, msg string) error {
	return &Error{Category: cat, Msg: msg, Cause: cause}
}

// BuildError is a build that the engine ran and that failed: which image, at which step, and
// the tail of the build's log. It matches ErrBuildFailed.
type BuildError struct {
	// Image is the reference being built.
	Image string
	// Step is the step that failed as the builder announced it ("Step 3/5 : RUN make"), or ""
	// when the build failed before its first step.
	Step string
	// Message is the engine's reason.
	Message string
	// Log is the tail of the build's output, up to a few kB.
	Log string
}

func (e *BuildError) Error() string {
	msg := "build image " + e.Image
	if e.Step != "" {
		msg += ": " + e.Step
	}
	msg += ": " + e.Message
	if e.Log != "" {
		msg += " (build log: " + e.Log + ")"
	}
	return msg
}

func (e *BuildError) Unwrap() error { return ErrBuildFailed }
