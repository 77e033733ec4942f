// Command composebox is a thin CLI over the composebox library.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/composebox/composebox/cleanup/tracking"
)

func main() {
	// A watchdog started by --reaper is this executable re-run: it must act as one before
	// anything else happens.
	if tracking.ReaperMain() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if ctx.Err() != nil && code != 0 {
		code = exitInterrupted
	}
	stop()
	os.Exit(code)
}
