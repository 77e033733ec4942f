package tracking

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// OwnerStatus says whether the process named by an owner label is alive. Only owners on this
// host can be checked: one on another host is backend.StatusUnknown, and so never stale. A pid
// that now belongs to a process with another start time, a zombie, and a missing pid are all
// stale.
func OwnerStatus(owner string) backend.OwnerStatus {
	if owner == labels.OwnerDetached {
		return backend.StatusDetached
	}
	o, err := labels.ParseOwner(owner)
	if err != nil {
		return backend.StatusUnknown
	}
	host, err := os.Hostname()
	if err != nil || host != o.Host {
		return backend.StatusUnknown
	}
	state, start, err := labels.ProcessStat(o.PID)
	switch {
	case err == nil && start == o.Start && state != 'Z' && state != 'X':
		return backend.StatusAlive
	case err == nil:
		return backend.StatusStale
	case errors.Is(err, fs.ErrNotExist):
		// /proc can hide other users' processes (hidepid): a pid the kernel still knows but will
		// not show cannot be checked.
		if kerr := syscall.Kill(o.PID, 0); errors.Is(kerr, syscall.EPERM) {
			return backend.StatusUnknown
		}
		return backend.StatusStale
	default:
		return backend.StatusUnknown
	}
}
