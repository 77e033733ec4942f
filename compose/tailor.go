package compose

import (
	"fmt"
	"maps"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
)

// DefaultChoiceExtension names, on a loaded project, the default service chosen for the task
// (LoadOptions' DefaultService or AgentImage, or the layout's), ahead of every rule of
// DefaultService. compose ignores x- keys; `composebox config` shows it.
const DefaultChoiceExtension = "x-composebox-default"

// tailor applies what the caller chose for the task, in this order: image overrides, the agent
// service, the default service.
func tailor(p *types.Project, r *Resolution, opts LoadOptions) error {
	for _, svc := range sortedKeys(opts.ImageOverrides) {
		ref := strings.TrimSpace(opts.ImageOverrides[svc])
		s, ok := p.Services[svc]
		if _, disabled := p.DisabledServices[svc]; !ok && disabled {
			continue // in a profile that is not enabled: nothing to replace
		}
		switch {
		case !ok:
			return errdefs.New(ErrInvalidConfig, fmt.Sprintf("image override for service %q: no such service (services: %s)",
				svc, strings.Join(p.ServiceNames(), ", ")))
		case ref == "":
			return errdefs.New(ErrInvalidConfig, fmt.Sprintf("image override for service %q: empty image reference", svc))
		}
		s.Image, s.Build = ref, nil
		if s.PullPolicy == types.PullPolicyBuild {
			s.PullPolicy = ""
		}
		p.Services[svc] = s
	}
	if opts.AgentImage != "" {
		if err := addAgent(p, opts.AgentImage); err != nil {
			return err
		}
	}
	choice := opts.DefaultService
	switch {
	case choice != "":
		if _, ok := p.Services[choice]; !ok {
			return errdefs.New(ErrInvalidConfig, fmt.Sprintf("default service %q: no such service (services: %s)",
				choice, strings.Join(p.ServiceNames(), ", ")))
		}
	case opts.AgentImage != "":
		choice = DefaultServiceName
	case r != nil && r.DefaultService != "":
		if _, ok := p.Services[r.DefaultService]; ok {
			choice = r.DefaultService
		}
	}
	if choice != "" {
		p.Extensions = withExtension(p.Extensions, DefaultChoiceExtension, choice)
	}
	return nil
}

// addAgent adds the service "default" on image: kept alive, with an init, and attached to every
// network of the project, as a harness's agent container beside the project would be. A project
// with no network at all gets its default one for the agent.
func addAgent(p *types.Project, image string) error {
	if _, ok := p.Services[DefaultServiceName]; ok {
		return errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"agent image %s: the project already has a service named %q, which would be replaced", image, DefaultServiceName))
	}
	if len(p.Networks) == 0 {
		p.Networks = types.Networks{"default": {Name: p.Name + "_default"}}
	}
	nets := map[string]*types.ServiceNetworkConfig{}
	for key := range p.Networks {
		nets[key] = nil
	}
	p.Services[DefaultServiceName] = types.ServiceConfig{
		Name:     DefaultServiceName,
		Image:    image,
		Command:  KeepAlive(),
		Init:     new(true),
		Networks: nets,
	}
	return nil
}

// withExtension returns a copy of e with key set: a loaded project's extensions may be shared.
func withExtension(e types.Extensions, key string, v any) types.Extensions {
	out := make(types.Extensions, len(e)+1)
	maps.Copy(out, e)
	out[key] = v
	return out
}
