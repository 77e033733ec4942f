package compose

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"
)

// mountedPath is a host path that the engine or compose opens when a sample's containers are
// created, long after Load checked it: a bind source, a local volume's bound device, a secret or
// config file, a seccomp profile.
type mountedPath struct {
	service string // "" for a project-level volume, secret or config
	field   string
	path    string // absolute
	bind    bool   // mounted into a container (the docker socket is refused, /dev/null allowed)
	set     func(resolved string)
}

// mountedPaths lists every such path of proj, each with a setter that rewrites it in proj.
func mountedPaths(proj *types.Project) []mountedPath {
	var out []mountedPath
	for _, name := range proj.ServiceNames() {
		s := proj.Services[name]
		for i, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind || v.Source == "" {
				continue
			}
			out = append(out, mountedPath{service: name, field: fmt.Sprintf("volumes[%d].source", i), path: v.Source, bind: true,
				set: func(r string) {
					svc := proj.Services[name]
					svc.Volumes = slices.Clone(svc.Volumes)
					svc.Volumes[i].Source = r
					proj.Services[name] = svc
				}})
		}
		for i, opt := range s.SecurityOpt {
			_, _, profile := parseSecurityOpt(opt)
			if profile == "" {
				continue
			}
			path := profile
			if !filepath.IsAbs(path) && proj.WorkingDir != "" {
				path = filepath.Join(proj.WorkingDir, profile) // compose reads it relative to the project
			}
			out = append(out, mountedPath{service: name, field: fmt.Sprintf("security_opt[%d]", i), path: path,
				set: func(r string) {
					svc := proj.Services[name]
					svc.SecurityOpt = slices.Clone(svc.SecurityOpt)
					svc.SecurityOpt[i] = "seccomp=" + r
					proj.Services[name] = svc
				}})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(proj.Volumes)) {
		v := proj.Volumes[key]
		if dev, ok := bindDevice(v); ok && !bool(v.External) {
			out = append(out, mountedPath{field: "volumes." + key + ".driver_opts.device", path: dev, bind: true,
				set: func(r string) {
					vol := proj.Volumes[key]
					vol.DriverOpts = maps.Clone(vol.DriverOpts)
					vol.DriverOpts["device"] = r
					proj.Volumes[key] = vol
				}})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(proj.Secrets)) {
		if f := proj.Secrets[key].File; f != "" && !bool(proj.Secrets[key].External) {
			out = append(out, mountedPath{field: "secrets." + key + ".file", path: f, bind: true,
				set: func(r string) { s := proj.Secrets[key]; s.File = r; proj.Secrets[key] = s }})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(proj.Configs)) {
		if f := proj.Configs[key].File; f != "" && !bool(proj.Configs[key].External) {
			out = append(out, mountedPath{field: "configs." + key + ".file", path: f, bind: true,
				set: func(r string) { c := proj.Configs[key]; c.File = r; proj.Configs[key] = c }})
		}
	}
	return out
}

// enforce rewrites a checked project into the form that was checked: every mounted host path
// becomes the path it resolved to, so that a symlink swapped in later is not followed (only a
// swap of a directory on the resolved path still is), and pull_policy becomes never on every
// service: composebox never pulls, and compose must not either.
func (p Policy) enforce(proj *types.Project) {
	conf := newConfiner(p, proj.WorkingDir)
	for _, m := range mountedPaths(proj) {
		if v := conf.check(m.path, m.bind); v.rule == "" && v.resolved != m.path {
			m.set(v.resolved)
		}
	}
	for name, s := range proj.Services {
		s.PullPolicy = types.PullPolicyNever
		proj.Services[name] = s
	}
}

// RecheckHostPaths checks every host path the engine or compose opens while creating proj's
// containers (bind sources, a local volume's bound directory, secret and config files, seccomp
// profiles) again, right before they are created, and rewrites each to the path it resolves to
// now. A path that has come to resolve outside the allowed roots since the task was loaded (a
// directory swapped for a symlink to /, say) is a *PolicyError (ErrPolicyViolation), and proj
// is left as it was. proj must be the sample's own copy.
func (p Policy) RecheckHostPaths(proj *types.Project) error {
	if proj == nil {
		return nil
	}
	conf := newConfiner(p, proj.WorkingDir)
	paths := mountedPaths(proj)
	var out []Violation
	resolved := make([]string, len(paths))
	for i, m := range paths {
		v := conf.check(m.path, m.bind)
		if v.rule != "" {
			out = append(out, Violation{Service: m.service, Field: m.field, Value: m.path, Rule: v.rule,
				Why: v.explain(m.path) + " (checked again before the containers are created)", OptIn: v.optIn})
		}
		resolved[i] = v.resolved
	}
	if len(out) > 0 {
		return &PolicyError{Op: "re-check host paths of " + proj.Name, Violations: out}
	}
	for i, m := range paths {
		if resolved[i] != m.path {
			m.set(resolved[i])
		}
	}
	return nil
}
