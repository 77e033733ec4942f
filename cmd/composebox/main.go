// Command composebox is a thin CLI over the composebox library.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/composebox/composebox/cmd/composebox/internal/initgc"
	"github.com/composebox/composebox/orchestrator/backends"
)

func main() {
	initgc.Restore()
	// A watchdog started by --reaper is this executable re-run: it must act as one before
	// anything else happens.
	if backends.ReaperMain() {
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal cancels the command, which then cleans up what it started; later
		// ones are absorbed so that a second Ctrl-C cannot cut that cleanup short and leak.
		first := true
		for s := range sigs {
			sig, _ := s.(syscall.Signal)
			if first {
				cancel(interrupted{sig: sig})
				first = false
			}
			fmt.Fprintf(os.Stderr, "composebox: %s: cleaning up before exiting\n", signalName(sig))
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	os.Exit(code)
}
