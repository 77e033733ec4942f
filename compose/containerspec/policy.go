package containerspec

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/compose"
)

// How a Spec's binds pass the policy. A compose file's binds may come only from the task
// directory (and the policy's AllowedMountRoots), because the file may come from anywhere. A
// Spec has no task directory: its author names each host path it mounts (the workspace, the
// mounts, the assets) in Go, with the same trust as the policy itself. So those exact paths
// (and its build's context and Dockerfile) are its allowed roots, and nothing else is, not even
// the directory that holds them all; every other rule (the docker socket, privileged, host
// namespaces, capabilities, devices, security_opt) applies unchanged. Because a whole system
// directory is never a sandbox's business, binding one of those, or anything under the kernel's
// and the engine's trees, is refused as well. A policy that names AllowedMountRoots keeps them:
// the operator's roots then bound every spec.

// sensitiveMountTrees may not be bound, nor anything under them.
var sensitiveMountTrees = []string{"/proc", "/sys", "/dev", "/boot", "/var/lib/docker", "/var/lib/containerd", "/run/containerd"}

// sensitiveMountDirs may not be bound whole; a file or directory below them may.
var sensitiveMountDirs = []string{"/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/var", "/run", "/root", "/home"}

// Policy is the policy a Spec's project is checked against: base, with the
// project's own bind sources as the allowed mount roots when base names none.
func Policy(base compose.Policy, proj *types.Project) compose.Policy {
	p := base
	if len(base.AllowedMountRoots) > 0 || proj == nil {
		return p
	}
	p.AllowedMountRoots = append(bindSources(proj), buildSources(proj)...)
	return p
}

// CheckProject checks a project made by Project against base as
// Policy adapts it, and refuses binds of sensitive host paths unless base allows any
// mount. Every violation comes back in one *compose.PolicyError (errdefs.ErrPolicyViolation).
func CheckProject(base compose.Policy, proj *types.Project) error {
	if proj == nil {
		return nil
	}
	var out []compose.Violation
	// The spec's binds are its roots, not the directory that happens to hold them all.
	scoped := *proj
	scoped.WorkingDir = ""
	if err := Policy(base, proj).Check(&scoped); err != nil {
		var pe *compose.PolicyError
		if !errors.As(err, &pe) {
			return err
		}
		out = append(out, pe.Violations...)
	}
	if !base.AllowAnyMount {
		for _, name := range proj.ServiceNames() {
			for i, v := range proj.Services[name].Volumes {
				if v.Type != types.VolumeTypeBind || v.Source == "" {
					continue
				}
				if why, bad := sensitiveSource(v.Source); bad {
					out = append(out, compose.Violation{Service: name, Field: fmt.Sprintf("volumes[%d].source", i),
						Value: compose.VolumeString(v), Rule: "host-path", Why: why, OptIn: "--allow any-mount"})
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &compose.PolicyError{Violations: out}
}

// sensitiveSource reports a host path a sandbox may not bind, with why.
func sensitiveSource(src string) (string, bool) {
	resolved := compose.ResolvePath(filepath.Clean(src))
	for _, p := range []string{filepath.Clean(src), resolved} {
		for _, tree := range sensitiveMountTrees {
			if compose.Within(p, tree) {
				return "a kernel or engine path (" + tree + ")", true
			}
		}
		if slices.Contains(sensitiveMountDirs, p) {
			return "a whole system directory (" + p + ")", true
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

// buildSources are the build context and Dockerfile of a project's services: named in Go by the
// spec's author, like its binds.
func buildSources(proj *types.Project) []string {
	var out []string
	for _, name := range proj.ServiceNames() {
		if b := proj.Services[name].Build; b != nil && filepath.IsAbs(b.Context) {
			out = append(out, filepath.Clean(b.Context))
			if b.DockerfileInline == "" {
				out = append(out, compose.DockerfilePath(b))
			}
		}
	}
	return out
}
