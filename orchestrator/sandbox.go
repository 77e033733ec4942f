package orchestrator

import (
	"github.com/composebox/composebox/lifecycle"
)

// Sandbox is one service of a live sample: a running container that exec and file calls are
// routed to. Its identity is immutable; it is safe for concurrent use.
type Sandbox struct {
	sample      *Sample
	service     string
	containerID string
	container   string
	workingDir  string
	user        string
	isDefault   bool
}

func (o *Orchestrator) newSandbox(s *Sample, st lifecycle.ServiceState, isDefault bool) *Sandbox {
	return &Sandbox{
		sample: s, service: st.Service, containerID: st.ContainerID, container: st.Container,
		workingDir: st.WorkingDir, user: st.User, isDefault: isDefault,
	}
}

// Service is the compose service name.
func (b *Sandbox) Service() string { return b.service }

// Project is the sample's compose project name.
func (b *Sandbox) Project() string { return b.sample.project }

// ContainerID and ContainerName identify the service's container.
func (b *Sandbox) ContainerID() string   { return b.containerID }
func (b *Sandbox) ContainerName() string { return b.container }

// WorkingDir is the container's working directory ("/" when the image sets none); relative
// paths in exec and file calls resolve against it.
func (b *Sandbox) WorkingDir() string { return b.workingDir }

// User is the container's default user ("" means the image's, root when unset).
func (b *Sandbox) User() string { return b.user }

// IsDefault reports whether this is the sample's default service.
func (b *Sandbox) IsDefault() bool { return b.isDefault }
