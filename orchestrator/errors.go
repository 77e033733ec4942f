package orchestrator

import "github.com/composebox/composebox/internal/errdefs"

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
)

// ErrorKind is the machine-readable kind of err, as the CLI prints it: invalid_config,
// policy_violation, prerequisite, not_found, is_a_directory, permission_denied, timeout,
// output_limit, unavailable, conflict, or internal.
func ErrorKind(err error) string { return errdefs.Kind(err) }
