// Package initgc keeps the garbage collector off while the CLI's packages initialise and until
// the heap has grown well past what they left, so that a short command never collects.
//
// Before main runs, Go initialises every package linked into the binary, and the compose
// library and client-go allocate some 10 MiB doing so (JSON schemas compiled, API schemes
// registered), most of it garbage at once. With the collector on, that took two collections
// during initialisation and one more as soon as main ran: a third of the CPU `composebox exec`
// spends, most of it before its first call to the engine. The variable below is initialised
// as soon as this package's one import is: packages initialise in import path order among those
// whose imports are done, and this path sorts ahead of the heavy ones (github.com/composebox
// before github.com/santhosh-tekuri, k8s.io, ...).
package initgc

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// percent is the collector's setting as GOGC gave it (100 by default, -1 for off).
var percent = debug.SetGCPercent(-1)

// headroom is how much the process may grow past what initialisation left before its first
// collection; after that one, GOGC governs as usual.
const headroom = 64 << 20

// Restore hands the collector back to GOGC and GOMEMLIMIT, after one collection that comes
// when the heap has grown by headroom (a command that ends sooner never collects). main calls
// it first.
func Restore() {
	if percent < 0 {
		return // GOGC=off: the user's choice stands
	}
	total := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(total)
	limit := debug.SetMemoryLimit(-1) // a negative limit reads it (GOMEMLIMIT's, else none)
	debug.SetMemoryLimit(min(limit, int64(total[0].Value.Uint64())+headroom))
	// The first collection frees the sentinel, and its cleanup puts GOGC and GOMEMLIMIT back.
	sentinel := new([4]*byte)
	runtime.AddCleanup(sentinel, func(limit int64) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}, limit)
}
