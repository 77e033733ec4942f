package compose

import (
	"errors"
	"path/filepath"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"
)

// How a ContainerSpec's binds pass the policy. A compose file's binds may come only from the
// task directory (the default AllowedMountRoots), because the file may come from anywhere. A
// ContainerSpec has no task directory: its author names each host path it mounts (the
// workspace, the mounts, the assets) in Go, with the same trust as the policy itself. So those
// exact paths are its allowed roots, and nothing else is; every other rule (the docker socket,
// privileged, host namespaces, capabilities, devices, unconfined security_opt) applies
// unchanged. Because a whole system directory is never a sandbox's business, binding one of
// those, or anything under the kernel's and the engine's trees, is refused as well. A policy
// that names AllowedMountRoots keeps them: the operator's roots then bound every spec.

// sensitiveMountTrees may not be bound, nor anything under them.
var sensitiveMountTrees = []string{"/proc", "/sys", "/dev", "/boot", "/var/lib/docker", "/var/lib/containerd", "/run/containerd"}

// sensitiveMountDirs may not be bound whole; a file or directory below them may.
var sensitiveMountDirs = []string{"/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var", "/run", "/root", "/home"}

// ContainerPolicy is the policy a ContainerSpec's project is checked against: base, with the
// project's own bind sources as the allowed mount roots when base names none.
func ContainerPolicy(base Policy, proj *types.Project) Policy {
	p := base
	if len(base.AllowedMountRoots) > 0 || proj == nil {
		return p
	}
	p.AllowedMountRoots = bindSources(proj)
	return p
}

// CheckContainerProject checks a project made by ContainerProject against base as
// ContainerPolicy adapts it, and refuses binds of sensitive host paths unless base allows any
// mount. Every violation comes back in one *PolicyError (ErrPolicyViolation).
func CheckContainerProject(base Policy, proj *types.Project) error {
	if proj == nil {
		return nil
	}
	var out []Violation
	if err := ContainerPolicy(base, proj).Check(proj); err != nil {
		var pe *PolicyError
		if !errors.As(err, &pe) {
			return err
		}
		out = append(out, pe.Violations...)
	}
	if !base.AllowAnyMount {
		for _, name := range proj.ServiceNames() {
			for _, v := range proj.Services[name].Volumes {
				if v.Type != types.VolumeTypeBind || v.Source == "" {
					continue
				}
				if why, bad := sensitiveSource(v.Source); bad {
					out = append(out, Violation{Service: name, Field: "volumes", Value: volumeString(v), Why: why})
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &PolicyError{Violations: out}
}

// sensitiveSource reports a host path a sandbox may not bind, with why.
func sensitiveSource(src string) (string, bool) {
	resolved := resolvePath(filepath.Clean(src))
	for _, p := range []string{filepath.Clean(src), resolved} {
		for _, tree := range sensitiveMountTrees {
			if within(p, tree) {
				return "a kernel or engine path (" + tree + "); allow with AllowAnyMount", true
			}
		}
		if slices.Contains(sensitiveMountDirs, p) {
			return "a whole system directory (" + p + "); allow with AllowAnyMount", true
		}
	}
	return "", false
}

// bindSources are the host paths a project's services bind, absolute, each once.
func bindSources(proj *types.Project) []string {
	var out []string
	for _, name := range proj.ServiceNames() {
		for _, v := range proj.Services[name].Volumes {
			if v.Type == types.VolumeTypeBind && v.Source != "" && filepath.IsAbs(v.Source) {
				out = append(out, filepath.Clean(v.Source))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
