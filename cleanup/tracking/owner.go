package tracking

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Status is what a project's owner label says about who holds it (the backend boundary's
// own type).
type Status = backend.OwnerStatus

const (
	StatusAlive    = backend.StatusAlive
	StatusStale    = backend.StatusStale
	StatusDetached = backend.StatusDetached
	StatusUnknown  = backend.StatusUnknown
)

// OwnerStatus says whether the process named by an owner label is alive. Only owners on this
// host can be checked: one on another host is StatusUnknown, and so never stale. A pid that now
// belongs to a process with another start time, a zombie, and a missing pid are all stale.
func OwnerStatus(owner string) Status {
	if owner == labels.OwnerDetached {
		return StatusDetached
	}
	o, err := labels.ParseOwner(owner)
	if err != nil {
		return StatusUnknown
	}
	host, err := os.Hostname()
	if err != nil || host != o.Host {
		return StatusUnknown
	}
	state, start, err := labels.ProcessStat(o.PID)
	switch {
	case err == nil && start == o.Start && state != 'Z' && state != 'X':
		return StatusAlive
	case err == nil:
		return StatusStale
	case errors.Is(err, fs.ErrNotExist):
		// /proc can hide other users' processes (hidepid): a pid the kernel still knows but will
		// not show cannot be checked.
		if kerr := syscall.Kill(o.PID, 0); errors.Is(kerr, syscall.EPERM) {
			return StatusUnknown
		}
		return StatusStale
	default:
		return StatusUnknown
	}
}
