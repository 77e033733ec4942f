// Package cleanup finds and removes what composebox created. The engine's labels are the source
// of truth: every container, network and volume carries the keys below, so a fresh process can
// find a crashed run's leftovers without any state file.
package cleanup

import (
	"fmt"
	"os"
	"sync"
)

// Label keys (CONTRACT section 7). They are part of composebox's public surface: changing one
// orphans every resource created under the old key.
const (
	LabelManaged = "dev.composebox.managed"
	LabelTask    = "dev.composebox.task"
	LabelSample  = "dev.composebox.sample"
	LabelOwner   = "dev.composebox.owner"
	LabelCreated = "dev.composebox.created"
	// LabelImage marks an image composebox builds for itself (the base image), as opposed to a
	// task's image, so that image hygiene never removes it along with a finished task's images.
	LabelImage = "dev.composebox.image"
)

// ManagedFilter is the engine filter that selects everything composebox created.
const ManagedFilter = LabelManaged + "=true"

// OwnerDetached is the owner of a sample handed over by `composebox up`: never stale.
const OwnerDetached = "detached"

var (
	selfOnce  sync.Once
	selfOwner string
)

// SelfOwner is this process's owner label value, hostname:pid:start-time. The start time
// (clock ticks since boot, from /proc/<pid>/stat) makes a reused pid distinguishable from the
// process that created a sample.
func SelfOwner() string {
	selfOnce.Do(func() {
		host, _ := os.Hostname()
		pid := os.Getpid()
		start, err := ProcessStartTime(pid)
		if err != nil {
			start = 0
		}
		selfOwner = fmt.Sprintf("%s:%d:%d", host, pid, start)
	})
	return selfOwner
}

// ProcessStartTime returns the start time of pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat).
func ProcessStartTime(pid int) (uint64, error) {
	_, start, err := processStat(pid)
	return start, err
}
