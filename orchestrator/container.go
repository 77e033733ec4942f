package orchestrator

import (
	"context"
	"fmt"
	"time"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/compose/containerspec"
)

// Single-container sandbox specs: the types live in compose/containerspec, where a spec is turned
// into a one-service compose project; they are re-exported here, next to the verbs that run
// them (Spawn in session.go, Run in oneshot.go).
type (
	// ContainerSpec describes a single-container sandbox: image or build, workdir and
	// workspace, mounts and assets, env, user (or the host's uid:gid), limits, network and
	// ports, setup commands and extra run args. See containerspec.Spec.
	ContainerSpec = containerspec.Spec
	// ContainerBuild builds a spec's image from a Dockerfile.
	ContainerBuild = containerspec.Build
	// Mount is a bind mount, "host:container[:ro|rw]" as a string (ParseMount).
	Mount = containerspec.Mount
	// Asset is a static asset, mounted read-only at /static/<SavePath>.
	Asset = containerspec.Asset
	// HostUser is a host uid:gid a container runs as (CurrentHostUser gives this process's).
	HostUser = containerspec.HostUser
	// PublishedPort publishes a container port on the host.
	PublishedPort = containerspec.PublishedPort
)

// Network modes of a ContainerSpec.
const (
	NetworkNone   = containerspec.NetworkNone
	NetworkBridge = containerspec.NetworkBridge
	NetworkHost   = containerspec.NetworkHost
)

// ParseMount parses "host:container[:ro|rw]".
func ParseMount(s string) (Mount, error) { return containerspec.ParseMount(s) }

// ParsePublishedPort parses [[IP:]HOSTPORT:]CONTAINERPORT[/PROTO].
func ParsePublishedPort(s string) ([]PublishedPort, error) {
	return containerspec.ParsePublishedPort(s)
}

// CurrentHostUser is this process's uid and gid, for ContainerSpec.HostUser.
func CurrentHostUser() HostUser { return containerspec.CurrentHostUser() }

// containerSpawn is what one spawn adds to a spec, for the project generation.
type containerSpawn struct {
	mounts       []Mount
	ports        []PublishedPort
	env          map[string]string
	readyTimeout time.Duration
}

// containerTask generates the spec's one-service project, checks it against the policy (with
// the spec's own binds as its mount roots, containerspec.CheckProject), and runs it through
// TaskInit like any other project: prerequisites, the same policy check, a build when the spec
// has one, and the image's presence. Dangerous extra args fail here, before anything starts.
func (o *Orchestrator) containerTask(ctx context.Context, spec ContainerSpec, sp containerSpawn) (*Task, error) {
	p, err := containerspec.Project(spec, containerspec.Options{
		Mounts: sp.mounts, Ports: sp.ports, Env: sp.env, DefaultImage: o.cfg.defaultImage,
	})
	if err != nil {
		return nil, err
	}
	if err := containerspec.CheckProject(o.cfg.policy, p); err != nil {
		return nil, err
	}
	// The spec's own binds are the task's roots, as CheckProject had them.
	policy := containerspec.Policy(o.cfg.policy, p)
	task, err := o.TaskInit(ctx, TaskSpec{
		Name:    containerspec.TaskName(spec),
		Project: p,
		Policy:  &policy,
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
