package labels

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Owner is a parsed owner value, hostname:pid:start-time. The start time (clock ticks since
// boot, from /proc/<pid>/stat) makes a reused pid distinguishable from the process that created
// a sample.
type Owner struct {
	Host  string
	PID   int
	Start uint64
}

// ParseOwner parses an owner value. The host part may itself hold colons; the last two fields
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

var (
	selfOnce  sync.Once
	selfOwner string
)

// SelfOwner is this process's owner value, hostname:pid:start-time.
func SelfOwner() string {
	selfOnce.Do(func() {
		host, _ := os.Hostname()
		pid := os.Getpid()
		start, err := ProcessStartTime(pid)
		if err != nil {
			start = 0
		}
		selfOwner = Owner{Host: host, PID: pid, Start: start}.String()
	})
	return selfOwner
}

// ProcessStartTime returns the start time of pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat).
func ProcessStartTime(pid int) (uint64, error) {
	_, start, err := ProcessStat(pid)
	return start, err
}

// ProcessStat returns the state (field 3) and start time (field 22, clock ticks since boot) of
// pid from /proc/<pid>/stat.
func ProcessStat(pid int) (byte, uint64, error) {
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
