package sandboxio

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/docker/docker/client"
	dockererrdefs "github.com/docker/docker/errdefs"

	"github.com/composebox/composebox/internal/errdefs"
)

// Target is one running container that execs and file operations go to. It is a plain value:
// copy it freely. Every function of this package is safe for concurrent use on one Target,
// provided the Client is (the docker client is).
type Target struct {
	// Client is the Engine API client. This package never closes it.
	Client client.APIClient
	// Container is the container's id or name.
	Container string
	// Service names the container in error messages ("read /x in web: ..."). Optional.
	Service string
	// WorkingDir is where relative paths and a relative or empty Cwd resolve. It should be the
	// container's working directory (TargetFor fills it in); "" is taken as "/" for paths and
	// as the container's own default for execs.
	WorkingDir string
	// User is the default user of execs and the user file operations act as: a name or
	// uid[:gid]. "" is the container's configured user.
	User string
}

// TargetFor inspects a running container once and returns a Target for it, with the working
// directory ("/" when the image sets none) and the configured user filled in.
func TargetFor(ctx context.Context, c client.APIClient, containerID, service string) (Target, error) {
	t := Target{Client: c, Container: containerID, Service: service}
	info, err := c.ContainerInspect(ctx, containerID)
	if err != nil {
		return t, t.engineError(ctx, "inspect "+containerID, err)
	}
	t.WorkingDir = "/"
	if info.Config != nil {
		if info.Config.WorkingDir != "" {
			t.WorkingDir = info.Config.WorkingDir
		}
		t.User = info.Config.User
	}
	return t, nil
}

// in is the " in <service>" part of error messages.
func (t Target) in() string {
	if t.Service == "" {
		return ""
	}
	return " in " + t.Service
}

// Resolve turns p into an absolute, clean POSIX path: a relative p is taken against the
// working directory. "" stays "".
func (t Target) Resolve(p string) string {
	if p == "" {
		return ""
	}
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	wd := t.WorkingDir
	if wd == "" {
		wd = "/"
	}
	return path.Join(wd, p)
}

// engineError categorises a failed Engine API call made for op. A container that is gone or
// not running is ErrUnavailable, with the diagnostics that say why; cancellation stays
// cancellation.
func (t Target) engineError(ctx context.Context, op string, err error) error {
	msg := op + t.in()
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || dockererrdefs.IsContext(err)):
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return errdefs.Wrap(errdefs.ErrTimeout, ctx.Err(), msg)
		}
		return fmt.Errorf("%s: %w", msg, ctx.Err())
	case dockererrdefs.IsNotFound(err), dockererrdefs.IsConflict(err):
		// exec create says "not found" for a removed container and "conflict" for one that is
		// stopped, paused or restarting.
		return t.unavailable(ctx, msg, err)
	case client.IsErrConnectionFailed(err):
		return errdefs.Wrap(errdefs.ErrUnavailable, err, msg+": docker engine unreachable")
	default:
		return fmt.Errorf("%s: %w", msg, err)
	}
}

// unavailable builds an ErrUnavailable for op with the container's diagnostics in the message.
func (t Target) unavailable(ctx context.Context, op string, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
	defer cancel()
	d, derr := Diagnose(dctx, t)
	msg := op + ": " + d.String()
	if derr != nil {
		msg = op + ": container " + t.Container + " unavailable (diagnostics failed: " + derr.Error() + ")"
	}
	if cause == nil {
		return errdefs.New(errdefs.ErrUnavailable, msg)
	}
	return errdefs.Wrap(errdefs.ErrUnavailable, cause, msg)
}

// fileError is a categorised error about path: its message always holds the path.
func (t Target) fileError(cat error, op, p, problem string) error {
	return errdefs.New(cat, fmt.Sprintf("%s %s%s: %s", op, p, t.in(), problem))
}

// validEnvKey reports whether k can be passed as an environment variable name.
func validEnvKey(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}
