package cleanup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Status is what a project's owner label says about who holds it.
type Status string

const (
	// StatusAlive: the owner process is running on this host.
	StatusAlive Status = "alive"
	// StatusStale: the owner process is gone (or its pid now belongs to another process).
	StatusStale Status = "stale"
	// StatusDetached: the project was handed over by `composebox up`; it is never stale.
	StatusDetached Status = "detached"
	// StatusUnknown: the owner is on another host, or the label cannot be read. Never stale.
	StatusUnknown Status = "unknown"
)

// Owner is a parsed owner label, hostname:pid:start-time.
type Owner struct {
	Host  string
	PID   int
	Start uint64
}

// ParseOwner parses an owner label. The host part may itself hold colons; the last two fields
// are the pid and the start time.
func ParseOwner(s string) (Owner, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Owner{}, fmt.Errorf("parse owner %q: want host:pid:start-time", s)
	}
	j := strings.LastIndexByte(s[:i], ':')
	if j <= 0 {
		return Owner{}, fmt.Errorf("parse owner %q: want host:pid:start-time", s)
	}
	pid, err := strconv.Atoi(s[j+1 : i])
	if err != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("parse owner %q: bad pid", s)
	}
	start, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return Owner{}, fmt.Errorf("parse owner %q: bad start time", s)
	}
	return Owner{Host: s[:j], PID: pid, Start: start}, nil
}

func (o Owner) String() string { return fmt.Sprintf("%s:%d:%d", o.Host, o.PID, o.Start) }

// OwnerStatus says whether the process named by an owner label is alive. Only owners on this
// host can be checked: one on another host is StatusUnknown, and so never stale. A pid that now
// belongs to a process with another start time, a zombie, and a missing pid are all stale.
func OwnerStatus(owner string) Status {
	if owner == OwnerDetached {
		return StatusDetached
	}
	o, err := ParseOwner(owner)
	if err != nil {
		return StatusUnknown
	}
	host, err := os.Hostname()
	if err != nil || host != o.Host {
		return StatusUnknown
	}
	state, start, err := processStat(o.PID)
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

// processStat returns the state (field 3) and start time (field 22, clock ticks since boot) of
// pid from /proc/<pid>/stat.
func processStat(pid int) (byte, uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or ')', so count fields
	// from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: no command field", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: start time: %w", pid, err)
	}
	return fields[0][0], start, nil
}
