package orchestrator

import (
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"

	"github.com/composebox/composebox/lifecycle"
)

// Error categories. Every error the package returns that a caller may branch on matches one
// of these with errors.Is; ErrNotFound also matches fs.ErrNotExist and ErrPermission
// fs.ErrPermission.
var (
	ErrInvalidConfig   = errdefs.ErrInvalidConfig
	ErrPolicyViolation = errdefs.ErrPolicyViolation
	ErrPrerequisite    = errdefs.ErrPrerequisite
	ErrNotFound        = errdefs.ErrNotFound
	ErrIsDirectory     = errdefs.ErrIsDirectory
	ErrPermission      = errdefs.ErrPermission
	ErrTimeout         = errdefs.ErrTimeout
	ErrOutputLimit     = errdefs.ErrOutputLimit
	ErrUnavailable     = errdefs.ErrUnavailable
	ErrConflict        = errdefs.ErrConflict
	ErrBuildFailed     = errdefs.ErrBuildFailed
)

// ErrNotRegularFile is what ReadFile of a FIFO, a device or a socket gives, with
// ErrInvalidConfig: such a file is never opened, since reading it could block or never end.
var ErrNotRegularFile = backend.ErrNotRegularFile

// ErrHostFirewall marks a host where a sample's networks cannot be kept off the host's own
// addresses (not root, no nftables): SampleInit fails rather than start the sample unprotected.
// It is an ErrPrerequisite; the policy's host-access (--allow host-access) is the opt-out.
var ErrHostFirewall = lifecycle.ErrHostFirewall

// BuildError is a task image's build that failed at a step of its Dockerfile: errors.As gives
// the step and the tail of the build log. It matches ErrBuildFailed.
type BuildError = errdefs.BuildError

// ErrorKind is the machine-readable kind of err, as the CLI prints it: invalid_config,
// policy_violation, prerequisite, not_found, is_a_directory, permission_denied, timeout,
// output_limit, unavailable, conflict, build_failed, or internal.
func ErrorKind(err error) string { return errdefs.Kind(err) }

// engineLost marks err as ErrUnavailable when the backend says the engine could not be
// reached (a daemon that stopped, a socket that is gone) and it has no category of its own:
// the caller can then tell "the engine is down, try again later" from a bug.
func (o *Orchestrator) engineLost(err error) error {
	if err == nil || errdefs.Kind(err) != "internal" {
		return err
	}
	if backend.Unreachable(o.backend, err) {
		return errdefs.Wrap(errdefs.ErrUnavailable, err, o.backend.Kind()+" engine unreachable")
	}
	return err
}
