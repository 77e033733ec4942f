package compose

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
)

// Policy is the security policy every project must pass. It is an allowlist over every field of
// the compose file format (policyTable): a field is allowed, checked by a named rule, or denied,
// and a field the table does not know is denied. The Allow switches are the opt-ins: each lets
// one kind of denied field through, and each has a short name for `--allow KIND` (AllowKinds).
// The zero value of every switch denies. DefaultPolicy is the zero value plus the docker socket
// paths. The limit fields are optional defaults that ApplyDefaults puts on services setting none.
//
// The YAML and JSON names are those of a `--policy FILE`.
type Policy struct {
	// AllowPrivileged (privileged) permits privileged: true, build.privileged, the build
	// entitlement security.insecure and privileged lifecycle hooks.
	AllowPrivileged bool `json:"allow_privileged,omitempty" yaml:"allow_privileged,omitempty"`
	// AllowHostNetwork (host-network) permits network_mode: host, a network on the host driver
	// or the external network "host", and build.network: host or the entitlement network.host.
	AllowHostNetwork bool `json:"allow_host_network,omitempty" yaml:"allow_host_network,omitempty"`
	// AllowHostNamespaces (host-namespaces) permits pid, ipc, uts, userns_mode or cgroup: host,
	// and bind mounts whose propagation is shared with the host.
	AllowHostNamespaces bool `json:"allow_host_namespaces,omitempty" yaml:"allow_host_namespaces,omitempty"`
	// AllowOtherContainers (other-containers) permits reaching containers outside the sample:
	// container:NAME namespaces, volumes_from a container, external_links, network_mode naming
	// a network, and external volumes.
	AllowOtherContainers bool `json:"allow_other_containers,omitempty" yaml:"allow_other_containers,omitempty"`
	// AllowDevices (devices) permits devices, device_cgroup_rules, gpus and device reservations.
	AllowDevices bool `json:"allow_devices,omitempty" yaml:"allow_devices,omitempty"`
	// AllowDockerSocket (docker-socket) permits a bind mount of the docker socket (or of a
	// directory holding it) and use_api_socket.
	AllowDockerSocket bool `json:"allow_docker_socket,omitempty" yaml:"allow_docker_socket,omitempty"`
	// AllowUnconfined (unconfined) permits security_opt values beyond no-new-privileges and the
	// default seccomp and AppArmor profiles: custom profiles, label options, unconfined.
	AllowUnconfined bool `json:"allow_unconfined,omitempty" yaml:"allow_unconfined,omitempty"`
	// AllowRuntime (runtime) permits a runtime other than runc, a non-default isolation and
	// OCI annotations, which runtimes may act on.
	AllowRuntime bool `json:"allow_runtime,omitempty" yaml:"allow_runtime,omitempty"`
	// AllowSysctls (sysctls) permits sysctls outside the namespaced net.* and IPC ones.
	AllowSysctls bool `json:"allow_sysctls,omitempty" yaml:"allow_sysctls,omitempty"`
	// AllowVolumeDriverOpts (volume-driver-opts) permits volume driver_opts other than a tmpfs,
	// volume drivers other than local, and volume_driver. A local volume that binds a host
	// directory (o: bind) still has to come from the allowed roots.
	AllowVolumeDriverOpts bool `json:"allow_volume_driver_opts,omitempty" yaml:"allow_volume_driver_opts,omitempty"`
	// AllowNetworkDrivers (network-drivers) permits network drivers other than bridge (macvlan,
	// ipvlan, overlay, plugins), network and endpoint driver_opts, and IPAM drivers.
	AllowNetworkDrivers bool `json:"allow_network_drivers,omitempty" yaml:"allow_network_drivers,omitempty"`
	// AllowImageVolumes (image-volumes) permits volumes of type image.
	AllowImageVolumes bool `json:"allow_image_volumes,omitempty" yaml:"allow_image_volumes,omitempty"`
	// AllowProviders (providers) permits provider services and models, which make compose run
	// a program on the host.
	AllowProviders bool `json:"allow_providers,omitempty" yaml:"allow_providers,omitempty"`
	// AllowCgroupParent (cgroup-parent) permits cgroup_parent.
	AllowCgroupParent bool `json:"allow_cgroup_parent,omitempty" yaml:"allow_cgroup_parent,omitempty"`
	// AllowLogging (logging) permits logging drivers other than json-file, local and none:
	// those send the output to an address or a daemon of the host.
	AllowLogging bool `json:"allow_logging,omitempty" yaml:"allow_logging,omitempty"`
	// AllowHostPriority (host-priority) permits oom_kill_disable, a negative oom_score_adj,
	// realtime CPU scheduling and the rtprio and nice ulimits, which put the container ahead of
	// the host's own processes.
	AllowHostPriority bool `json:"allow_host_priority,omitempty" yaml:"allow_host_priority,omitempty"`
	// AllowOtherTasksImages (other-tasks-images) permits running an image that composebox
	// built for another task. Its tag is a hash of that task's build inputs, which anyone who
	// has the files can compute, so without this a task could run what another task built from
	// files it never saw.
	AllowOtherTasksImages bool `json:"allow_other_tasks_images,omitempty" yaml:"allow_other_tasks_images,omitempty"`
	// AllowAnyMount (any-mount) permits host paths from anywhere: bind sources, build contexts,
	// env files, secret files, seccomp profiles. The docker socket stays denied.
	AllowAnyMount bool `json:"allow_any_mount,omitempty" yaml:"allow_any_mount,omitempty"`
	// AllowPublicPorts (public-ports) permits a published port on a host address the file names
	// other than loopback (0.0.0.0, ::, an interface's address). Without it every published port
	// binds 127.0.0.1, whatever the file says.
	AllowPublicPorts bool `json:"allow_public_ports,omitempty" yaml:"allow_public_ports,omitempty"`
	// AllowHostAccess (host-access) lets a sample's networks and builds reach the host's own
	// addresses (the gateway, docker0, every interface). Without it the host firewall drops that
	// traffic, and a host where the firewall cannot be set up refuses to start samples.
	AllowHostAccess bool `json:"allow_host_access,omitempty" yaml:"allow_host_access,omitempty"`
	// AllowAddURL (add-url) permits ADD of a URL in a Dockerfile, which the daemon fetches from
	// the host's network. A URL whose host is loopback, link-local, private or one of the
	// host's own addresses stays denied.
	AllowAddURL bool `json:"allow_add_url,omitempty" yaml:"allow_add_url,omitempty"`
	// AllowHostRoutes (host-routes) permits a network subnet, IP range, gateway or fixed
	// container address (ipam.config, ipv4_address, ipv6_address) that overlaps a route or an
	// address of the host, or lies outside private address space. While the sample lives, the
	// host would send traffic for those addresses to the sample instead: a LAN service, a
	// public one, the cloud's metadata address.
	AllowHostRoutes bool `json:"allow_host_routes,omitempty" yaml:"allow_host_routes,omitempty"`
	// AllowCapabilities lists capabilities permitted in cap_add beyond Docker's default set
	// (with or without CAP_, any case); "ALL" permits every capability.
	AllowCapabilities []string `json:"allow_capabilities,omitempty" yaml:"allow_capabilities,omitempty"`
	// AllowedMountRoots are host directories that host paths may come from, besides the task
	// directory.
	AllowedMountRoots []string `json:"allowed_mount_roots,omitempty" yaml:"allowed_mount_roots,omitempty"`
	// DockerSockets are the paths of the daemon's socket. Empty means /var/run/docker.sock and
	// /run/docker.sock.
	DockerSockets []string `json:"docker_sockets,omitempty" yaml:"docker_sockets,omitempty"`

	// Memory is a default memory limit in bytes (0: none). A policy file may give a size such
	// as 512m.
	Memory int64 `json:"memory,omitempty" yaml:"memory,omitempty"`
	// CPUs is a default CPU limit (0: none).
	CPUs float64 `json:"cpus,omitempty" yaml:"cpus,omitempty"`
	// Pids is a default pids limit (0: none).
	Pids int64 `json:"pids,omitempty" yaml:"pids,omitempty"`
	// EgressOff cuts the project off from outside networks: network_mode: none for a project of
	// one service, internal networks for more, so that services still reach each other.
	EgressOff bool `json:"egress_off,omitempty" yaml:"egress_off,omitempty"`
	// Egress is the task's egress allowlist (`--egress NAME[:PORT]`): with it, every service
	// reaches at most these names, through the sample's egress gateway (see docs/security.md).
	Egress []string `json:"egress,omitempty" yaml:"egress,omitempty"`
	// EgressResolver is the resolver allowed names are resolved through
	// (`--egress-resolver ADDR`); empty means the engine host's.
	EgressResolver string `json:"egress_resolver,omitempty" yaml:"egress_resolver,omitempty"`
}

// allowKind is one opt-in: its name on the command line, what it lets through, and its switch.
type allowKind struct {
	name   string
	allows string
	field  func(*Policy) *bool
}

// allowKinds are the opt-ins, each a stable word for `--allow KIND`.
var allowKinds = []allowKind{
	{"privileged", "privileged containers, builds and lifecycle hooks", func(p *Policy) *bool { return &p.AllowPrivileged }},
	{"host-network", "the host's network namespace", func(p *Policy) *bool { return &p.AllowHostNetwork }},
	{"host-namespaces", "the host's pid, ipc, uts, user or cgroup namespace, and shared mount propagation", func(p *Policy) *bool { return &p.AllowHostNamespaces }},
	{"other-containers", "namespaces, volumes, links and networks of containers outside the sample, and external volumes", func(p *Policy) *bool { return &p.AllowOtherContainers }},
	{"devices", "host devices, device cgroup rules and GPUs", func(p *Policy) *bool { return &p.AllowDevices }},
	{"docker-socket", "the docker socket", func(p *Policy) *bool { return &p.AllowDockerSocket }},
	{"unconfined", "security_opt beyond no-new-privileges and the default profiles", func(p *Policy) *bool { return &p.AllowUnconfined }},
	{"runtime", "a runtime other than runc, isolation and annotations", func(p *Policy) *bool { return &p.AllowRuntime }},
	{"sysctls", "sysctls outside the namespaced net.* and IPC ones", func(p *Policy) *bool { return &p.AllowSysctls }},
	{"volume-driver-opts", "volume drivers and driver_opts other than a tmpfs", func(p *Policy) *bool { return &p.AllowVolumeDriverOpts }},
	{"network-drivers", "network drivers other than bridge, and network driver_opts", func(p *Policy) *bool { return &p.AllowNetworkDrivers }},
	{"image-volumes", "volumes of type image", func(p *Policy) *bool { return &p.AllowImageVolumes }},
	{"providers", "provider services and models, which run programs on the host", func(p *Policy) *bool { return &p.AllowProviders }},
	{"cgroup-parent", "cgroup_parent", func(p *Policy) *bool { return &p.AllowCgroupParent }},
	{"logging", "logging drivers other than json-file, local and none", func(p *Policy) *bool { return &p.AllowLogging }},
	{"host-priority", "oom_kill_disable, a negative oom_score_adj, realtime scheduling and the rtprio and nice ulimits", func(p *Policy) *bool { return &p.AllowHostPriority }},
	{"other-tasks-images", "images composebox built for another task", func(p *Policy) *bool { return &p.AllowOtherTasksImages }},
	{"any-mount", "host paths from anywhere (the docker socket excepted)", func(p *Policy) *bool { return &p.AllowAnyMount }},
	{"public-ports", "published ports on a host address other than loopback", func(p *Policy) *bool { return &p.AllowPublicPorts }},
	{"host-access", "traffic from samples and builds to the host's own addresses", func(p *Policy) *bool { return &p.AllowHostAccess }},
	{"add-url", "ADD of a URL in a Dockerfile (never to the host's own, loopback, link-local or private addresses)", func(p *Policy) *bool { return &p.AllowAddURL }},
	{"host-routes", "network subnets and fixed addresses that overlap the host's routes or addresses, or lie outside private space", func(p *Policy) *bool { return &p.AllowHostRoutes }},
}

// AllowKinds lists the opt-in names `--allow KIND` accepts, in a stable order.
func AllowKinds() []string {
	out := make([]string, len(allowKinds))
	for i, k := range allowKinds {
		out[i] = k.name
	}
	return out
}

// AllowKindHelp describes what an opt-in lets through ("" for an unknown kind).
func AllowKindHelp(kind string) string {
	for _, k := range allowKinds {
		if k.name == kind {
			return k.allows
		}
	}
	return ""
}

// Allow turns on the opt-in named kind (one of AllowKinds). An unknown kind is ErrInvalidConfig
// listing the known ones.
func (p *Policy) Allow(kind string) error {
	for _, k := range allowKinds {
		if k.name == kind {
			*k.field(p) = true
			return nil
		}
	}
	return errdefs.New(ErrInvalidConfig, fmt.Sprintf("unknown opt-in %q: want one of %s", kind, strings.Join(AllowKinds(), ", ")))
}

// Allowed lists the opt-ins p has turned on, in AllowKinds order.
func (p Policy) Allowed() []string {
	var out []string
	for _, k := range allowKinds {
		if *k.field(&p) {
			out = append(out, k.name)
		}
	}
	return out
}

func (p Policy) allows(kind string) bool {
	for _, k := range allowKinds {
		if k.name == kind {
			return *k.field(&p)
		}
	}
	return false
}

// defaultCapabilities is Docker's default capability set (moby's oci/caps, unchanged since
// Engine 20.10): cap_add of one of these adds nothing a container does not already have.
var defaultCapabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}

// DefaultCapabilities is Docker's default capability set, for a backend that must grant
// exactly what a Docker container gets.
func DefaultCapabilities() []string { return slices.Clone(defaultCapabilities) }

var defaultSockets = []string{"/var/run/docker.sock", "/run/docker.sock"}

// DefaultPolicy denies every opt-in and sets no limits. The docker socket paths include the one
// DOCKER_HOST names, when it is a unix socket.
func DefaultPolicy() Policy {
	p := Policy{DockerSockets: slices.Clone(defaultSockets)}
	if u, err := url.Parse(os.Getenv("DOCKER_HOST")); err == nil && u.Scheme == "unix" && u.Path != "" {
		p.DockerSockets = append(p.DockerSockets, u.Path)
	}
	return p
}

// Violation is one problem with a project: something the policy denies, or (Invalid) a config
// that cannot run. Each names where it is, what the rule is, and what would allow it.
type Violation struct {
	// Service is the service the field belongs to; empty for the project level (networks,
	// volumes, secrets, configs, models, include, variables).
	Service string
	// Field is the field's path: within the service (cap_add, volumes[0].source,
	// build.context) or, at the project level, from the top (volumes.data.driver_opts).
	Field string
	// Value is the offending value as loaded.
	Value string
	// Rule names the table's rule that refused it: "capabilities", "host-path", "namespaces",
	// "unknown-field", "variables", ..., or the opt-in's kind for a field denied outright.
	Rule string
	// Why says what the value would do.
	Why string
	// OptIn is the command-line flag that allows it ("--allow privileged", "--allow-cap
	// SYS_PTRACE"); empty when nothing does.
	OptIn string
	// Invalid marks a config problem (ErrInvalidConfig) rather than a policy violation.
	Invalid bool
}

func (v Violation) String() string {
	var b strings.Builder
	if v.Service != "" {
		fmt.Fprintf(&b, "service %q: ", v.Service)
	}
	if v.Field != "" {
		b.WriteString(v.Field + ": ")
	}
	if v.Value != "" {
		b.WriteString(v.Value + ": ")
	}
	b.WriteString(v.Why)
	switch {
	case v.Invalid && v.OptIn != "":
		fmt.Fprintf(&b, " (set it with %s)", v.OptIn)
	case v.OptIn != "":
		fmt.Fprintf(&b, " (rule %s; allow with %s)", v.Rule, v.OptIn)
	case v.Rule != "" && !v.Invalid:
		fmt.Fprintf(&b, " (rule %s; no opt-in)", v.Rule)
	}
	return b.String()
}

// PolicyError lists every problem of a project, not just the first: policy violations and the
// config problems found with them. It matches ErrPolicyViolation with errors.Is when any item is
// a violation, and ErrInvalidConfig when any is Invalid; use errors.As to get the list.
type PolicyError struct {
	// Op is what was being done, e.g. "check /tasks/web/compose.yaml"; empty means "check policy".
	Op         string
	Violations []Violation
}

func (e *PolicyError) Error() string {
	op := e.Op
	if op == "" {
		op = "check policy"
	}
	if len(e.Violations) == 1 {
		return op + ": " + e.Violations[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", op, len(e.Violations))
	for _, v := range e.Violations {
		b.WriteString("\n  - " + v.String())
	}
	return b.String()
}

func (e *PolicyError) Is(target error) bool {
	for _, v := range e.Violations {
		if (target == ErrPolicyViolation && !v.Invalid) || (target == ErrInvalidConfig && v.Invalid) {
			return true
		}
	}
	return false
}

// Check returns a *PolicyError listing every violation of proj, each naming its service, field,
// rule and opt-in; nil when there is none. Every field of the project is walked against the
// policy table; host paths are resolved with symlinks followed, including a path that does not
// exist (yet). Check does not change proj; Load also rewrites what it checked (see enforce).
func (p Policy) Check(proj *types.Project) error {
	if proj == nil {
		return nil
	}
	c := newChecker(p, proj)
	c.walkProject()
	c.out = append(c.out, egressViolations(p, proj)...)
	if len(c.out) == 0 {
		return nil
	}
	return &PolicyError{Violations: c.out}
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
	} else {
		p.applyEgress(proj)
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

// Summary describes the policy in one line, for doctor: the opt-ins it turns on, the extra
// capabilities and mount roots, and the default limits it applies.
func (p Policy) Summary() string {
	var parts []string
	if allowed := p.Allowed(); len(allowed) > 0 {
		parts = append(parts, "allows "+strings.Join(allowed, ", "))
	}
	if len(p.AllowCapabilities) > 0 {
		parts = append(parts, "extra capabilities "+strings.Join(p.AllowCapabilities, ","))
	}
	if len(p.AllowedMountRoots) > 0 {
		parts = append(parts, "extra mount roots "+strings.Join(p.AllowedMountRoots, ","))
	}
	s := "default: every opt-in denied (" + strings.Join(AllowKinds(), ", ") +
		"), no capability beyond Docker's default set, host paths confined to the task directory"
	if len(parts) > 0 {
		s = "relaxed: " + strings.Join(parts, "; ")
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
	if len(p.Egress) > 0 {
		limits = append(limits, "egress only to "+strings.Join(p.Egress, ","))
	}
	if len(limits) > 0 {
		s += "; defaults: " + strings.Join(limits, ", ")
	}
	return s
}
