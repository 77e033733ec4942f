package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/composebox/composebox/compose"
)

// Single-container sandbox specs (seeds 000, 001 and 002): the types live in compose, where a
// spec is turned into a one-service compose project; they are re-exported here, next to the
// verbs that run them (Spawn in session.go, Run in oneshot.go).
type (
	// ContainerSpec describes a single-container sandbox: image or build, workdir and
	// workspace, mounts and assets, env, user (or the host's uid:gid), limits, network and
	// ports, setup commands and extra run args. See compose.ContainerSpec.
	ContainerSpec = compose.ContainerSpec
	// ContainerBuild builds a spec's image from a Dockerfile.
	ContainerBuild = compose.ContainerBuild
	// Mount is a bind mount, "host:container[:ro|rw]" as a string (ParseMount).
	Mount = compose.Mount
	// Asset is a static asset, mounted read-only at /static/<SavePath>.
	Asset = compose.Asset
	// HostUser is a host uid:gid a container runs as (CurrentHostUser gives this process's).
	HostUser = compose.HostUser
	// PublishedPort publishes a container port on the host.
	PublishedPort = compose.PublishedPort
)

// Network modes of a ContainerSpec.
const (
	NetworkNone   = compose.NetworkNone
	NetworkBridge = compose.NetworkBridge
	NetworkHost   = compose.NetworkHost
)

// ParseMount parses "host:container[:ro|rw]".
func ParseMount(s string) (Mount, error) { return compose.ParseMount(s) }

// ParsePublishedPort parses [[IP:]HOSTPORT:]CONTAINERPORT[/PROTO].
func ParsePublishedPort(s string) ([]PublishedPort, error) { return compose.ParsePublishedPort(s) }

// CurrentHostUser is this process's uid and gid, for ContainerSpec.HostUser.
func CurrentHostUser() HostUser { return compose.CurrentHostUser() }

// containerSpawn is what one spawn adds to a spec, for the project generation.
type containerSpawn struct {
	mounts       []Mount
	ports        []PublishedPort
	env          map[string]string
	readyTimeout time.Duration
}

// containerTask generates the spec's one-service project, checks it against the policy (with
// the spec's own binds as its mount roots, compose.CheckContainerProject), and runs it through
// TaskInit like any other project: prerequisites, the same policy check, a build when the spec
// has one, and the image's presence. Dangerous extra args fail here, before anything starts.
func (o *Orchestrator) containerTask(ctx context.Context, spec ContainerSpec, sp containerSpawn) (*Task, error) {
	p, err := compose.ContainerProject(spec, compose.ContainerOptions{
		Mounts: sp.mounts, Ports: sp.ports, Env: sp.env, DefaultImage: o.cfg.defaultImage,
	})
	if err != nil {
		return nil, err
	}
	if err := compose.CheckContainerProject(o.cfg.policy, p); err != nil {
		return nil, err
	}
	task, err := o.TaskInit(ctx, TaskSpec{
		Name:    compose.ContainerTaskName(spec),
		Project: p,
		// The project directory only bounds the binds; it holds no .env of the spec's.
		Environment:  map[string]string{"COMPOSE_DISABLE_ENV_FILE": "true"},
		ReadyTimeout: sp.readyTimeout,
	})
	if err != nil {
		return nil, err
	}
	if task.DefaultService() != compose.DefaultServiceName {
		// Cannot happen with a generated project; guard the session's assumption anyway.
		_ = task.Cleanup(ctx)
		return nil, fmt.Errorf("container task %s: default service is %q", task.Name(), task.DefaultService())
	}
	return task, nil
}
