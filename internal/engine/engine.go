// Package engine connects to the Docker Engine API the way the docker CLI would (DOCKER_HOST,
// DOCKER_CONTEXT, the config file's current context), without the CLI's habit of exiting the
// process on a bad context, and with API version negotiation always on.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/flags"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/errdefs"
)

// MinAPIVersion is the oldest Engine API composebox supports (Engine 20.10).
const MinAPIVersion = "1.41"

// DefaultPingTimeout bounds the first contact with the daemon, so a missing or wedged engine is
// reported in seconds rather than hanging a command.
const DefaultPingTimeout = 2 * time.Second

// StartHint tells a user how to get a daemon answering.
const StartHint = "start the engine (Debian as root: `make docker`, or `nohup dockerd >/var/log/dockerd.log 2>&1 &`), or point DOCKER_HOST at a running one"

// NewClient resolves the endpoint and returns a client for it. It does not contact the daemon.
// A DOCKER_CONTEXT (or config currentContext) naming a missing context is an ErrPrerequisite.
func NewClient() (client.APIClient, error) {
	opts := flags.NewClientOptions()
	cfg := config.LoadDefaultConfigFile(io.Discard)
	c, err := command.NewAPIClientFromFlags(opts, cfg)
	if err != nil {
		hint := "check DOCKER_HOST"
		if name := os.Getenv(command.EnvOverrideContext); name != "" {
			hint = fmt.Sprintf("DOCKER_CONTEXT=%s: unset it or create that context (`docker context ls`)", name)
		} else if cfg.CurrentContext != "" {
			hint = fmt.Sprintf("the docker config's currentContext %q: switch with `docker context use default`", cfg.CurrentContext)
		}
		return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "resolve docker endpoint ("+hint+")")
	}
	return c, nil
}

// Info is what the first contact with the daemon learnt.
type Info struct {
	Host       string
	APIVersion string
	OSType     string
	// MemTotal is the engine host's memory in bytes, when known (prereqs.Require reads it).
	MemTotal int64
	// NCPU is the engine host's CPU count, when known (prereqs.Require reads it).
	NCPU int
}

// Ping contacts the daemon within timeout (DefaultPingTimeout if zero), negotiates the API
// version and checks it is at least MinAPIVersion. Every failure is an ErrPrerequisite whose
// message says how to fix it.
func Ping(ctx context.Context, c client.APIClient, timeout time.Duration) (Info, error) {
	if timeout <= 0 {
		timeout = DefaultPingTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := c.Ping(pctx)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return Info{}, ctx.Err()
		}
		msg := fmt.Sprintf("ping docker daemon at %s: no answer", c.DaemonHost())
		if pctx.Err() != nil {
			msg = fmt.Sprintf("ping docker daemon at %s: no answer within %s", c.DaemonHost(), timeout)
		}
		return Info{}, errdefs.Wrap(errdefs.ErrPrerequisite, err, msg+" ("+StartHint+")")
	}
	c.NegotiateAPIVersionPing(p)
	info := Info{Host: c.DaemonHost(), APIVersion: p.APIVersion, OSType: p.OSType}
	if p.APIVersion != "" && versions.LessThan(p.APIVersion, MinAPIVersion) {
		return info, errdefs.New(errdefs.ErrPrerequisite, fmt.Sprintf(
			"check engine API version: %s is older than %s (upgrade to Docker Engine 20.10 or later)", p.APIVersion, MinAPIVersion))
	}
	if v := os.Getenv("DOCKER_API_VERSION"); v != "" && p.APIVersion != "" && versions.GreaterThan(v, p.APIVersion) {
		return info, errdefs.New(errdefs.ErrPrerequisite, fmt.Sprintf(
			"check engine API version: DOCKER_API_VERSION=%s is newer than the engine's %s (unset it)", v, p.APIVersion))
	}
	return info, nil
}

// Connect is NewClient followed by Ping. On error the client is closed.
func Connect(ctx context.Context, timeout time.Duration) (client.APIClient, Info, error) {
	c, err := NewClient()
	if err != nil {
		return nil, Info{}, err
	}
	info, err := Ping(ctx, c, timeout)
	if err != nil {
		_ = c.Close()
		return nil, info, err
	}
	return c, info, nil
}
