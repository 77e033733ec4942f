package orchestrator

import (
	"context"

	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator/backend"
)

// What the CLI and the server need of the layers below the library, so that they go through
// the library alone (a test in internal/layering holds them to it).

// StateDirEnv names the state cache directory when no option does.
const StateDirEnv = tracking.StateDirEnv

// DefaultStateDir is the state cache directory the environment names, else the XDG data dir.
func DefaultStateDir() string { return tracking.DefaultStateDir() }

// ComposeVersion is the version of the compose library composebox runs projects with.
func ComposeVersion() string { return lifecycle.ComposeVersion() }

// NotReadyError reports a sample that did not become ready: the contract's error, which
// every backend returns.
type NotReadyError = backend.NotReadyError

// ReapOptions configures Reap.
type ReapOptions = tracking.ReapOptions

// Reap waits for owner to die and then removes its samples (the watchdog `composebox reap`
// runs).
func Reap(ctx context.Context, owner string, opts ReapOptions) ([]backend.SweepResult, error) {
	return tracking.Reap(ctx, owner, opts)
}

// ReapBackend waits for owner to die and then removes its samples through b's own listing and
// Down: Reap on any backend (a Kubernetes cluster, say). opts.Client and opts.Engines are not
// used.
func ReapBackend(ctx context.Context, b backend.Remover, owner string, opts ReapOptions) ([]backend.SweepResult, error) {
	return tracking.ReapBackend(ctx, b, owner, opts)
}

// ReaperMain runs the watchdog when this process was started as one, and reports whether it
// was; a program that uses WithReaper calls it first thing in main. Its watchdog is a Docker
// client of the owner's engines: a program whose samples may run elsewhere (a Kubernetes
// cluster) calls backends.ReaperMain (orchestrator/backends) instead, whose watchdog removes
// them through the backend itself.
func ReaperMain() bool { return tracking.ReaperMain() }
