package compose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
)

// DefaultServiceName is the service that is the default by name, and the name of the one service
// of a generated project.
const DefaultServiceName = "default"

// DefaultExtension marks the default service when none is named "default": `x-default: true`.
const DefaultExtension = "x-default"

// DefaultService picks the project's default service: the one chosen for
// the task (LoadOptions.DefaultService, the agent of LoadOptions.AgentImage, or the layout's),
// else the service named "default", else the one marked `x-default: true`, else the only
// service. Anything else is an ErrInvalidConfig saying what to change; with no default at all,
// a *NoDefaultError.
func DefaultService(proj *types.Project) (string, error) {
	if proj == nil || len(proj.Services) == 0 {
		return "", errdefs.New(ErrInvalidConfig, "choose default service: the project has no services")
	}
	if choice, ok := proj.Extensions[DefaultChoiceExtension].(string); ok && choice != "" {
		if _, ok := proj.Services[choice]; ok {
			return choice, nil
		}
		return "", errdefs.New(ErrInvalidConfig, fmt.Sprintf("choose default service: %q: no such service", choice))
	}
	if _, ok := proj.Services[DefaultServiceName]; ok {
		return DefaultServiceName, nil
	}
	var marked []string
	for _, name := range proj.ServiceNames() {
		if isMarkedDefault(proj.Services[name]) {
			marked = append(marked, name)
		}
	}
	switch len(marked) {
	case 1:
		return marked[0], nil
	case 0:
	default:
		return "", errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"choose default service: services %s are all marked x-default: true; mark only one",
			strings.Join(marked, ", ")))
	}
	if len(proj.Services) == 1 {
		return proj.ServiceNames()[0], nil
	}
	return "", &NoDefaultError{Services: proj.ServiceNames()}
}

// NoDefaultError is a project of several services none of which is the default. It matches
// ErrInvalidConfig.
type NoDefaultError struct {
	Services []string // sorted
}

func (e *NoDefaultError) Error() string {
	return fmt.Sprintf("choose default service: %d services (%s) and none is the default: choose one for the task, "+
		"add an agent service beside them, name one %q or mark one x-default: true",
		len(e.Services), strings.Join(e.Services, ", "), DefaultServiceName)
}

func (e *NoDefaultError) Is(target error) bool { return target == ErrInvalidConfig }

// isMarkedDefault accepts `x-default: true` and, for hand-written YAML that quoted it, "true".
func isMarkedDefault(s types.ServiceConfig) bool {
	switch v := s.Extensions[DefaultExtension].(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

// ServiceOrder lists the services with the default first, then the others sorted by name: the
// order of a sample's sandboxes.
func ServiceOrder(proj *types.Project) ([]string, error) {
	def, err := DefaultService(proj)
	if err != nil {
		return nil, err
	}
	names := proj.ServiceNames()
	names = slices.DeleteFunc(names, func(n string) bool { return n == def })
	return append([]string{def}, names...), nil
}
