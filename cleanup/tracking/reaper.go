package tracking

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The watchdog is the owner's own executable re-executed (like moby's reexec), in two stages so
// that it is nobody's child: the owner starts a short-lived "spawn" stage and waits for it; that
// stage starts the "watch" stage in a new session and exits at once, so the watchdog is
// re-parented to init and no goroutine of the owner waits on it. The program's main runs the
// stages by calling ReaperMain first thing.
const (
	reaperOwnerEnv = "COMPOSEBOX_REAPER_OWNER"
	reaperStageEnv = "COMPOSEBOX_REAPER_STAGE"
	// reaperEnginesEnv lists the engines to sweep, one endpoint a line (engine.ParseEndpoint).
	reaperEnginesEnv = "COMPOSEBOX_REAPER_ENGINES"
	// reaperBackendEnv is the owner's backend as JSON (backend.Description), which a watchdog
	// that can rebuild backends (ReaperMainWith) removes the owner's projects through.
	reaperBackendEnv = "COMPOSEBOX_REAPER_BACKEND"
)

// Rebuild makes, in the watchdog, the backend its owner described; the watchdog closes it.
type Rebuild func(ctx context.Context, d backend.Description) (backend.Backend, error)

var (
	reaperMu      sync.Mutex
	reaperStarted bool
	// reaperMainCalled records that this program's main calls ReaperMain, without which a
	// re-executed copy of it would run as the program itself.
	reaperMainCalled bool
	// reaperRebuild is the factory the program's main gave ReaperMainWith: with it the
	// watchdog removes projects through the backend's own verbs, on any backend; without it
	// the watchdog is a Docker client of the owner's engines.
	reaperRebuild Rebuild
)

// ReaperMainWith is ReaperMain for a program that can rebuild any of its backends from a
// description (orchestrator/backends' ReaperMain): its watchdog lists the dead owner's
// projects through the rebuilt backend and removes them with its Down, so that a reaper
// works on whatever runs the samples (a Kubernetes cluster as well as Docker engines).
func ReaperMainWith(rebuild Rebuild) bool {
	reaperMu.Lock()
	reaperRebuild = rebuild
	reaperMu.Unlock()
	return ReaperMain()
}

// ReaperMain turns this process into a stage of the watchdog when StartReaper started it as
// one. A program that starts a watchdog (orchestrator.WithReaper, `--reaper`) calls it first
// thing in main, and in TestMain for a test binary:
//
//	if tracking.ReaperMain() {
//		return
//	}
//
// In a stage, it does the stage's work and exits the process with the stage's status, so it
// does not return. Otherwise it returns false at once. A stray variable in a user's environment
// does not hijack a program: only an owner of this host makes a stage.
func ReaperMain() bool {
	reaperMu.Lock()
	reaperMainCalled = true
	reaperMu.Unlock()
	owner, ok := os.LookupEnv(reaperOwnerEnv)
	if !ok {
		return false
	}
	stage := os.Getenv(reaperStageEnv)
	_ = os.Unsetenv(reaperOwnerEnv)
	_ = os.Unsetenv(reaperStageEnv)
	o, err := labels.ParseOwner(owner)
	if host, _ := os.Hostname(); err != nil || o.Host != host {
		return false
	}
	switch stage {
	case "spawn":
		if err := spawnStage(context.Background(), owner, "watch", os.Environ()); err != nil {
			fmt.Fprintln(os.Stderr, err) // the owner reports it
			os.Exit(1)
		}
		os.Exit(0)
	case "watch":
		os.Exit(runReaper(owner))
	}
	return false
}

// StartReaper starts the watchdog for owner, once per process: a copy of this executable that
// removes owner's projects once owner has died. d describes the backend owner's samples are
// on; a non-empty stateDir is the state directory whose sample directories the watchdog
// removes with their projects. The program's main must call ReaperMain (or ReaperMainWith);
// when it does not, StartReaper fails with ErrPrerequisite rather than run a second copy of
// the program.
//
// When main gave ReaperMainWith a factory, the watchdog rebuilds the backend from d and
// removes through it (ReapBackend), whatever its kind. Otherwise the watchdog is a Docker
// client: d must be a Docker backend's, whose engine (d.Endpoint, else the environment's) or
// engines (d.Engines) it sweeps (Reap).
func StartReaper(ctx context.Context, owner, stateDir string, d backend.Description) error {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if reaperStarted {
		return nil
	}
	if !reaperMainCalled {
		return errdefs.New(errdefs.ErrPrerequisite, "start reaper: this program's main does not call tracking.ReaperMain, so it cannot run the watchdog")
	}
	if reaperRebuild == nil && !d.HostReaper {
		return errdefs.New(errdefs.ErrPrerequisite, "start reaper: the watchdog of this program watches Docker engines only, not a "+d.Kind+" backend: its main must call backends.ReaperMain (orchestrator/backends) instead of orchestrator.ReaperMain")
	}
	env := withoutReaperEnv(os.Environ())
	if d.Endpoint != "" {
		// The watchdog reaches the engine the way its environment says, TLS settings included.
		env = append(env, "DOCKER_HOST="+d.Endpoint)
	}
	if stateDir != "" {
		env = append(env, StateDirEnv+"="+stateDir)
	}
	if reaperRebuild != nil {
		js, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("start reaper: describe the backend: %w", err)
		}
		env = append(env, reaperBackendEnv+"="+string(js))
	} else if len(d.Engines) > 0 {
		eps := make([]string, len(d.Engines))
		for i, e := range d.Engines {
			eps[i] = e.Endpoint
		}
		env = append(env, reaperEnginesEnv+"="+strings.Join(eps, "\n"))
	}
	if err := spawnStage(ctx, owner, "spawn", env); err != nil {
		return fmt.Errorf("start reaper: %w", err)
	}
	reaperStarted = true
	return nil
}

// spawnStage runs this executable with env as the given stage of the watchdog for owner: the
// spawn stage is waited for; the watch stage is started in a new session with its standard
// streams on /dev/null, and left to run.
func spawnStage(ctx context.Context, owner, stage string, env []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Dir = "/"
	cmd.Env = append(env, reaperOwnerEnv+"="+owner, reaperStageEnv+"="+stage)
	if stage == "watch" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		return cmd.Start() // the spawn stage exits right after: nothing waits on the watchdog
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s stage: %w: %s", stage, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func withoutReaperEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, reaperOwnerEnv+"=") && !strings.HasPrefix(kv, reaperStageEnv+"=") && !strings.HasPrefix(kv, reaperEnginesEnv+"=") &&
			!strings.HasPrefix(kv, reaperBackendEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// runReaper is the watchdog's main: it survives the owner's terminal going away, and exits once
// it has cleaned up after the owner's death.
func runReaper(owner string) int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	if js, ok := os.LookupEnv(reaperBackendEnv); ok {
		_ = os.Unsetenv(reaperBackendEnv)
		reaperMu.Lock()
		rebuild := reaperRebuild
		reaperMu.Unlock()
		var d backend.Description
		if rebuild == nil || json.Unmarshal([]byte(js), &d) != nil {
			return 1
		}
		if _, err := ReapDescribed(context.Background(), owner, d, rebuild, ReapOptions{}); err != nil {
			return 1
		}
		return 0
	}
	var opts ReapOptions
	if list := os.Getenv(reaperEnginesEnv); list != "" {
		for _, s := range strings.Split(list, "\n") {
			ep, err := engine.ParseEndpoint(s)
			if err != nil {
				return 1
			}
			opts.Engines = append(opts.Engines, ep)
		}
	}
	if _, err := Reap(context.Background(), owner, opts); err != nil {
		return 1
	}
	return 0
}
