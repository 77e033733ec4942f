package compose

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// Policy is the security policy a project must pass (CONTRACT section 2). The zero value of every
// Allow switch forbids; DefaultPolicy is the zero value plus the default docker socket paths.
// The limit fields are optional defaults that ApplyDefaults puts on services setting none.
type Policy struct {
	// AllowPrivileged permits privileged: true, build.privileged and the build entitlement
	// security.insecure.
	AllowPrivileged bool
	// AllowHostNetwork permits network_mode: host, and build.network: host or the build
	// entitlement network.host.
	AllowHostNetwork bool
	// AllowHostNamespaces permits pid, ipc, uts, userns_mode or cgroup: host.
	AllowHostNamespaces bool
	// AllowCapabilities lists dangerous capabilities permitted in cap_add anyway (with or
	// without CAP_, any case); "ALL" permits every capability. The dangerous ones are ALL,
	// SYS_ADMIN, NET_ADMIN, SYS_MODULE, SYS_RAWIO, DAC_READ_SEARCH and BPF.
	AllowCapabilities []string
	// AllowDevices permits devices and device_cgroup_rules.
	AllowDevices bool
	// AllowDockerSocket permits a bind mount of the docker socket (or of a directory holding
	// it) and use_api_socket.
	AllowDockerSocket bool
	// AllowUnconfined permits security_opt values that turn confinement off: seccomp,
	// apparmor or systempaths=unconfined, and label=disable.
	AllowUnconfined bool
	// AllowAnyMount permits bind mounts from anywhere on the host.
	AllowAnyMount bool
	// AllowedMountRoots are the host directories bind mounts (and file-based secrets and
	// configs) may come from. Empty means the project directory (the task directory).
	AllowedMountRoots []string
	// DockerSockets are the paths of the daemon's socket. Empty means /var/run/docker.sock and
	// /run/docker.sock.
	DockerSockets []string

	// Memory is a default memory limit in bytes (0: none).
	Memory int64
	// CPUs is a default CPU limit (0: none).
	CPUs float64
	// Pids is a default pids limit (0: none).
	Pids int64
	// EgressOff cuts the project off from outside networks: network_mode: none for a project of
	// one service, internal networks for more, so that services still reach each other.
	EgressOff bool
}

// dangerousCapabilities are refused in cap_add unless listed in Policy.AllowCapabilities.
// Beyond the contract's ALL, SYS_ADMIN and NET_ADMIN: SYS_MODULE (load kernel modules),
// SYS_RAWIO (raw device and port I/O), DAC_READ_SEARCH (open_by_handle_at, the "shocker"
// escape) and BPF.
var dangerousCapabilities = []string{"ALL", "SYS_ADMIN", "NET_ADMIN", "SYS_MODULE", "SYS_RAWIO", "DAC_READ_SEARCH", "BPF"}

var defaultSockets = []string{"/var/run/docker.sock", "/run/docker.sock"}

// DefaultPolicy forbids everything section 2 lists and sets no limits. The docker socket paths
// include the one DOCKER_HOST names, when it is a unix socket.
func DefaultPolicy() Policy {
	p := Policy{DockerSockets: slices.Clone(defaultSockets)}
	if u, err := url.Parse(os.Getenv("DOCKER_HOST")); err == nil && u.Scheme == "unix" && u.Path != "" {
		p.DockerSockets = append(p.DockerSockets, u.Path)
	}
	return p
}

// Violation is one thing a project asks for that the policy forbids.
type Violation struct {
	Service string // empty for a project-level resource
	Field   string // e.g. "cap_add", "volumes", "security_opt"
	Value   string // the offending value as written
	Why     string // what it does and which switch allows it
}

func (v Violation) String() string {
	where := "project"
	if v.Service != "" {
		where = fmt.Sprintf("service %q", v.Service)
	}
	return fmt.Sprintf("%s: %s: %s (%s)", where, v.Field, v.Value, v.Why)
}

// PolicyError lists every violation of a project, not just the first. It matches
// ErrPolicyViolation with errors.Is; use errors.As to get the list.
type PolicyError struct {
	Violations []Violation
}

func (e *PolicyError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	noun := "violations"
	if len(parts) == 1 {
		noun = "violation"
	}
	return fmt.Sprintf("check policy: %d %s: %s", len(parts), noun, strings.Join(parts, "; "))
}

func (e *PolicyError) Is(target error) bool { return target == ErrPolicyViolation }

// Check returns a *PolicyError (ErrPolicyViolation) listing every violation of proj, each
// naming its service, field and value; nil when there is none. Bind mount sources and the
// allowed roots are compared with symlinks resolved, including a source that does not exist yet
// (its longest existing parent is resolved) and a dangling symlink.
func (p Policy) Check(proj *types.Project) error {
	if proj == nil {
		return nil
	}
	c := checker{p: p, roots: p.roots(proj), sockets: p.sockets()}
	for _, name := range proj.ServiceNames() {
		c.service(proj, name, proj.Services[name])
	}
	if len(c.out) == 0 {
		return nil
	}
	return &PolicyError{Violations: c.out}
}

func (p Policy) roots(proj *types.Project) []string {
	roots := p.AllowedMountRoots
	if len(roots) == 0 && proj.WorkingDir != "" {
		roots = []string{proj.WorkingDir}
	}
	var out []string
	for _, r := range roots {
		if abs, err := filepath.Abs(r); err == nil {
			out = append(out, resolvePath(abs))
		}
	}
	return out
}

func (p Policy) sockets() []string {
	socks := p.DockerSockets
	if len(socks) == 0 {
		socks = defaultSockets
	}
	var out []string
	for _, s := range socks {
		s = filepath.Clean(s)
		out = append(out, s, resolvePath(s))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

type checker struct {
	p       Policy
	roots   []string
	sockets []string
	out     []Violation
}

func (c *checker) add(service, field, value, why string) {
	c.out = append(c.out, Violation{Service: service, Field: field, Value: value, Why: why})
}

func (c *checker) service(proj *types.Project, name string, s types.ServiceConfig) {
	p := c.p
	if !p.AllowPrivileged {
		if s.Privileged {
			c.add(name, "privileged", "true", "full access to the host; allow with AllowPrivileged")
		}
		if s.Build != nil && s.Build.Privileged {
			c.add(name, "build.privileged", "true", "privileged build steps; allow with AllowPrivileged")
		}
	}
	if !p.AllowHostNetwork {
		for _, f := range []struct{ field, value string }{{"network_mode", s.NetworkMode}, {"net", s.Net}} {
			if isHost(f.value) {
				c.add(name, f.field, f.value, "the host's network namespace; allow with AllowHostNetwork")
			}
		}
		if s.Build != nil && isHost(s.Build.Network) {
			c.add(name, "build.network", s.Build.Network, "the host's network during the build; allow with AllowHostNetwork")
		}
	}
	if s.Build != nil {
		for _, e := range s.Build.Entitlements {
			switch strings.ToLower(strings.TrimSpace(e)) {
			case "security.insecure":
				if !p.AllowPrivileged {
					c.add(name, "build.entitlements", e, "privileged build steps; allow with AllowPrivileged")
				}
			case "network.host":
				if !p.AllowHostNetwork {
					c.add(name, "build.entitlements", e, "the host's network during the build; allow with AllowHostNetwork")
				}
			}
		}
	}
	if !p.AllowHostNamespaces {
		for _, f := range []struct{ field, value string }{
			{"pid", s.Pid}, {"ipc", s.Ipc}, {"uts", s.Uts}, {"userns_mode", s.UserNSMode}, {"cgroup", s.Cgroup},
		} {
			if isHost(f.value) {
				c.add(name, f.field, f.value, "a host namespace; allow with AllowHostNamespaces")
			}
		}
	}
	for _, capability := range s.CapAdd {
		norm := normalizeCap(capability)
		if slices.Contains(dangerousCapabilities, norm) && !c.capAllowed(norm) {
			c.add(name, "cap_add", capability, "a capability that can break out of the container; allow with AllowCapabilities")
		}
	}
	if !p.AllowDevices {
		for _, d := range s.Devices {
			c.add(name, "devices", deviceString(d), "direct access to a host device; allow with AllowDevices")
		}
		for _, r := range s.DeviceCgroupRules {
			c.add(name, "device_cgroup_rules", r, "access to host devices; allow with AllowDevices")
		}
	}
	if !p.AllowUnconfined {
		for _, opt := range s.SecurityOpt {
			if unconfines(opt) {
				c.add(name, "security_opt", opt, "turns confinement off; allow with AllowUnconfined")
			}
		}
	}
	if s.UseAPISocket && !p.AllowDockerSocket {
		c.add(name, "use_api_socket", "true", "mounts the docker socket; allow with AllowDockerSocket")
	}
	for _, v := range s.Volumes {
		switch v.Type {
		case types.VolumeTypeBind:
			c.hostPath(name, "volumes", volumeString(v), v.Source)
		case types.VolumeTypeVolume:
			// A local volume with o=bind is a bind mount of its device in disguise.
			if vol, ok := proj.Volumes[v.Source]; ok && !bool(vol.External) {
				if dev, ok := bindDevice(vol); ok {
					c.hostPath(name, "volumes", fmt.Sprintf("%s (volume %q binds %s)", volumeString(v), v.Source, dev), dev)
				}
			}
		}
	}
	for _, sec := range s.Secrets {
		if def, ok := proj.Secrets[sec.Source]; ok && def.File != "" && !bool(def.External) {
			c.hostPath(name, "secrets", fmt.Sprintf("%s (file %s)", sec.Source, def.File), def.File)
		}
	}
	for _, cfg := range s.Configs {
		if def, ok := proj.Configs[cfg.Source]; ok && def.File != "" && !bool(def.External) {
			c.hostPath(name, "configs", fmt.Sprintf("%s (file %s)", cfg.Source, def.File), def.File)
		}
	}
	if s.Build != nil {
		for _, sec := range s.Build.Secrets {
			if def, ok := proj.Secrets[sec.Source]; ok && def.File != "" && !bool(def.External) {
				c.hostPath(name, "build.secrets", fmt.Sprintf("%s (file %s)", sec.Source, def.File), def.File)
			}
		}
	}
}

// hostPath checks one host path a service mounts: never the docker socket, and only from the
// allowed roots.
func (c *checker) hostPath(service, field, value, source string) {
	if source == "" {
		return
	}
	abs := source
	if !filepath.IsAbs(abs) {
		// compose-go makes bind sources absolute; anything else is relative to nothing we know.
		c.add(service, field, value, "a host path that is not absolute")
		return
	}
	abs = filepath.Clean(abs)
	resolved := resolvePath(abs)
	if !c.p.AllowDockerSocket {
		for _, sock := range c.sockets {
			for _, src := range []string{abs, resolved} {
				if within(sock, src) {
					what := "the docker socket"
					if src != sock {
						what = "a directory holding the docker socket " + sock
					}
					c.add(service, field, value, "bind mount of "+what+"; allow with AllowDockerSocket")
					return
				}
			}
		}
	}
	if c.p.AllowAnyMount {
		return
	}
	for _, root := range c.roots {
		if within(resolved, root) {
			return
		}
	}
	where := resolved
	if where != abs {
		where = fmt.Sprintf("%s, which resolves to %s,", abs, resolved)
	}
	c.add(service, field, value, fmt.Sprintf("%s is outside the allowed roots %s; allow with AllowedMountRoots or AllowAnyMount",
		where, strings.Join(c.roots, ", ")))
}

func (c *checker) capAllowed(norm string) bool {
	for _, a := range c.p.AllowCapabilities {
		if a := normalizeCap(a); a == "ALL" || a == norm {
			return true
		}
	}
	return false
}

func isHost(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "host") }

func normalizeCap(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

// unconfines reports a security_opt that switches off seccomp, AppArmor, SELinux labelling or
// the masked /proc and /sys paths. Docker accepts both key=value and the older key:value.
func unconfines(opt string) bool {
	o := strings.ToLower(strings.TrimSpace(opt))
	i := strings.IndexAny(o, "=:")
	if i < 0 {
		return false
	}
	key, val := strings.TrimSpace(o[:i]), strings.TrimSpace(o[i+1:])
	switch key {
	case "seccomp", "apparmor", "systempaths":
		return val == "unconfined"
	case "label":
		return val == "disable"
	}
	return false
}

// bindDevice returns the host path a local volume binds (driver_opts o=bind, device=PATH).
func bindDevice(v types.VolumeConfig) (string, bool) {
	if v.Driver != "" && v.Driver != "local" {
		return "", false
	}
	dev := v.DriverOpts["device"]
	if dev == "" {
		return "", false
	}
	for o := range strings.SplitSeq(v.DriverOpts["o"], ",") {
		if o = strings.TrimSpace(o); o == "bind" || o == "rbind" {
			return dev, true
		}
	}
	return "", false
}

func deviceString(d types.DeviceMapping) string {
	s := d.Source
	if d.Target != "" {
		s += ":" + d.Target
	}
	if d.Permissions != "" {
		s += ":" + d.Permissions
	}
	return s
}

func volumeString(v types.ServiceVolumeConfig) string {
	s := v.Source + ":" + v.Target
	if v.ReadOnly {
		s += ":ro"
	}
	return s
}

// within reports whether path is root or below it. Both must be clean and absolute.
func within(path, root string) bool {
	if root == "/" {
		return true
	}
	return path == root || strings.HasPrefix(path, root+"/")
}

// resolvePath resolves every symlink in an absolute path, like filepath.EvalSymlinks, but
// also for a path that does not exist (yet): the existing part is resolved and the rest kept
// as written, and a dangling symlink is followed to where it points. Docker creates missing
// bind sources, so what matters is where they would land.
func resolvePath(p string) string {
	const maxLinks = 255
	links := 0
	resolved := "/"
	rest := strings.Split(filepath.Clean(p), "/")
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			resolved = next
			continue
		}
		target, err := os.Readlink(next)
		if links++; err != nil || links > maxLinks {
			return filepath.Join(append([]string{next}, rest...)...)
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved
}

// ApplyDefaults puts the policy's optional limits on every service that sets none, and cuts
// egress when EgressOff is set. It is a no-op for a policy without them. It changes proj.
func (p Policy) ApplyDefaults(proj *types.Project) {
	if proj == nil {
		return
	}
	for name, s := range proj.Services {
		var lim *types.Resource
		if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
			lim = s.Deploy.Resources.Limits
		}
		if p.Memory > 0 && s.MemLimit == 0 && (lim == nil || lim.MemoryBytes == 0) {
			s.MemLimit = types.UnitBytes(p.Memory)
		}
		if p.CPUs > 0 && s.CPUS == 0 && (lim == nil || lim.NanoCPUs == 0) {
			s.CPUS = float32(p.CPUs)
		}
		if p.Pids > 0 && s.PidsLimit == 0 && (lim == nil || lim.Pids == 0) {
			s.PidsLimit = p.Pids
		}
		proj.Services[name] = s
	}
	if p.EgressOff {
		cutEgress(proj)
	}
}

// cutEgress leaves a project no route out. One service gets network_mode: none. With more,
// every project network becomes internal, which keeps service-to-service traffic, and a service
// on the default bridge is cut off. External networks are not the project's to change.
func cutEgress(proj *types.Project) {
	single := len(proj.Services) == 1
	for name, s := range proj.Services {
		switch mode := strings.ToLower(s.NetworkMode); {
		case mode == "bridge" || mode == "default" || (mode == "" && single):
			s.NetworkMode, s.Networks = "none", nil
		}
		proj.Services[name] = s
	}
	used := map[string]bool{}
	for _, s := range proj.Services {
		for n := range s.Networks {
			used[n] = true
		}
	}
	for name, n := range proj.Networks {
		switch {
		case !used[name]:
			delete(proj.Networks, name) // nothing joins it any more: do not create or look it up
		case !bool(n.External):
			n.Internal = true
			proj.Networks[name] = n
		}
	}
}

// Summary describes the policy in one line, for doctor: what it allows beyond the default,
// and the default limits it applies.
func (p Policy) Summary() string {
	var allowed []string
	for _, a := range []struct {
		on   bool
		name string
	}{
		{p.AllowPrivileged, "privileged"}, {p.AllowHostNetwork, "host network"},
		{p.AllowHostNamespaces, "host namespaces"}, {p.AllowDevices, "devices"},
		{p.AllowDockerSocket, "docker socket"}, {p.AllowUnconfined, "unconfined security_opt"},
		{p.AllowAnyMount, "mounts from anywhere"},
	} {
		if a.on {
			allowed = append(allowed, a.name)
		}
	}
	if len(p.AllowCapabilities) > 0 {
		allowed = append(allowed, "cap_add "+strings.Join(p.AllowCapabilities, ","))
	}
	s := "default: privileged, host namespaces, dangerous capabilities, devices, the docker socket, unconfined security_opt and mounts outside the task directory are rejected"
	if len(allowed) > 0 {
		s = "relaxed: allows " + strings.Join(allowed, ", ")
	}
	var limits []string
	if p.Memory > 0 {
		limits = append(limits, fmt.Sprintf("memory %d MiB", p.Memory>>20))
	}
	if p.CPUs > 0 {
		limits = append(limits, fmt.Sprintf("cpus %g", p.CPUs))
	}
	if p.Pids > 0 {
		limits = append(limits, fmt.Sprintf("pids %d", p.Pids))
	}
	if p.EgressOff {
		limits = append(limits, "egress off")
	}
	if len(limits) > 0 {
		s += "; defaults: " + strings.Join(limits, ", ")
	}
	return s
}
