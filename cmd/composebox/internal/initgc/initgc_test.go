package initgc

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The collector is off from initialisation until the first collection, which the memory limit
// brings about once the heap has grown by headroom; then GOGC and GOMEMLIMIT are as they were.
func TestRestoreHandsTheCollectorBackAfterOneCollection(t *testing.T) {
	if percent < 0 {
		t.Skip("GOGC=off in this test's environment")
	}
	limit := debug.SetMemoryLimit(-1)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GC percent during initialisation: %d, want -1 (off)", got)
	}
	Restore()
	if got := debug.SetMemoryLimit(-1); got >= limit || got <= headroom {
		t.Fatalf("memory limit after Restore: %d, want what initialisation left plus %d (below %d)", got, headroom, limit)
	}
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) != limit {
		if time.Now().After(deadline) {
			t.Fatal("the first collection did not hand the collector back")
		}
		runtime.GC()
		runtime.Gosched()
	}
	if got := debug.SetGCPercent(percent); got != percent {
		t.Errorf("GC percent after the first collection: %d, want %d", got, percent)
	}
}
