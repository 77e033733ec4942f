package compose

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// checker walks one project against the policy table and collects every violation.
type checker struct {
	p    Policy
	proj *types.Project
	conf *confiner
	svc  string // the service being walked, "" at the project level
	out  []Violation
}

func newChecker(p Policy, proj *types.Project) *checker {
	return &checker{p: p, proj: proj, conf: newConfiner(p, proj.WorkingDir)}
}

// site is where a rule applies: the field's concrete path and the structure holding it.
type site struct {
	path   string
	parent reflect.Value
}

// add records a violation at a concrete path (services.web.cap_add[1], volumes.d.driver_opts).
func (c *checker) add(path, value, rule, why, optIn string) {
	v := Violation{Service: c.svc, Field: path, Value: value, Rule: rule, Why: why, OptIn: optIn}
	if c.svc != "" {
		v.Field = strings.TrimPrefix(path, "services."+c.svc+".")
	}
	c.out = append(c.out, v)
}

func (c *checker) invalid(path, value, rule, why, fix string) {
	c.add(path, value, rule, why, fix)
	c.out[len(c.out)-1].Invalid = true
}

// deny records a violation of an opt-in kind unless the policy allows it.
func (c *checker) deny(path, value, kind, why string) {
	if !c.p.allows(kind) {
		c.add(path, value, kind, why, optInFlag(kind))
	}
}

// hostPath records a violation when a host path is not allowed, and returns it resolved.
func (c *checker) hostPath(path, value, hostPath string, bind bool) string {
	v := c.conf.check(hostPath, bind)
	if v.rule != "" {
		c.add(path, value, v.rule, v.explain(value), v.optIn)
	}
	return v.resolved
}

func (c *checker) service() types.ServiceConfig { return c.proj.Services[c.svc] }

func str(v reflect.Value) string { return render(v) }

// The rules the table names.
var policyRules = map[string]func(c *checker, at site, v reflect.Value){
	"capabilities":        ruleCapabilities,
	"namespaces":          ruleNamespaces,
	"volumes-from":        ruleVolumesFrom,
	"security-opt":        ruleSecurityOpt,
	"sysctls":             ruleSysctls,
	"runtime":             ruleRuntime,
	"logging-driver":      ruleLoggingDriver,
	"oom-score":           ruleOOMScore,
	"pull-policy":         func(*checker, site, reflect.Value) {}, // rewritten to never by enforce
	"volume-type":         ruleVolumeType,
	"bind-source":         ruleBindSource,
	"propagation":         rulePropagation,
	"build-context":       ruleBuildContext,
	"dockerfile":          ruleDockerfile,
	"additional-contexts": ruleAdditionalContexts,
	"env-file":            ruleFile(false),
	"label-file":          ruleFile(false),
	"extends-file":        ruleFile(false),
	"develop-path":        ruleFile(false),
	"include-file":        ruleFile(false),
	"object-file":         ruleFile(true),
	"object-environment":  ruleObjectEnvironment,
	"entitlements":        ruleEntitlements,
	"build-network":       ruleBuildNetwork,
	"host-ip":             ruleHostIP,
	"network-driver":      ruleNetworkDriver,
	"ipam-driver":         ruleIPAMDriver,
	"external-network":    ruleExternalNetwork,
	"volume-driver":       ruleVolumeDriver,
	"volume-driver-opts":  ruleVolumeDriverOpts,
	"labels":              ruleLabels,
	"ulimits":             ruleUlimits,
}

// NormalizeCap is a capability's name as Docker knows it: upper case, without CAP_.
func NormalizeCap(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

func ruleCapabilities(c *checker, at site, v reflect.Value) {
	for i, capability := range v.Interface().([]string) {
		norm := NormalizeCap(capability)
		if slices.Contains(defaultCapabilities, norm) {
			continue
		}
		allowed := slices.ContainsFunc(c.p.AllowCapabilities, func(a string) bool {
			a = NormalizeCap(a)
			return a == "ALL" || a == norm
		})
		if !allowed {
			c.add(fmt.Sprintf("%s[%d]", at.path, i), capability, "capabilities",
				"a capability outside Docker's default set", "--allow-cap "+norm)
		}
	}
}

// ruleNamespaces checks network_mode, net, pid, ipc, uts, userns_mode and cgroup: the host's
// namespaces and another container's are opt-ins; a service of the sample is fine.
func ruleNamespaces(c *checker, at site, v reflect.Value) {
	field := at.path[strings.LastIndexByte(at.path, '.')+1:]
	raw := v.String()
	mode := strings.ToLower(strings.TrimSpace(raw))
	network := field == "network_mode" || field == "net"
	switch {
	case mode == "host" && network:
		c.deny(at.path, raw, "host-network", "the host's network namespace")
	case mode == "host":
		c.deny(at.path, raw, "host-namespaces", "the host's "+field+" namespace")
	case strings.HasPrefix(mode, types.ContainerPrefix):
		c.deny(at.path, raw, "other-containers", "the namespace of a container outside the sample")
	case strings.HasPrefix(mode, types.ServicePrefix):
		name := strings.TrimSpace(raw[len(types.ServicePrefix):])
		if _, ok := c.proj.Services[name]; !ok {
			c.invalid(at.path, raw, "namespaces", "no service "+name+" in the project", "")
		}
	case network && bridgeMode(mode):
		// The sample's own bridge network stands in for the engine's default bridge (see
		// ownBridge). The engine's own is shared with every container on the host, other
		// samples included, and the host firewall does not cover it: it protects only the
		// networks composebox creates. Asking for it takes the host-access opt-in.
		if wantsEngineBridge(c.service()) {
			c.deny(at.path, raw, "host-access", "the engine's shared default bridge ("+EngineBridgeExtension+"), shared with every container on the host and not kept off the host")
		}
	case network && mode == "none":
	case network:
		c.deny(at.path, raw, "other-containers", "joins the network "+raw+", outside the sample")
	case field == "ipc" && (mode == "private" || mode == "shareable" || mode == "none"):
	case field == "cgroup" && mode == "private":
	default:
		c.invalid(at.path, raw, "namespaces", "not a mode the engine knows", "")
	}
}

func ruleVolumesFrom(c *checker, at site, v reflect.Value) {
	for i, ref := range v.Interface().([]string) {
		name := ref
		if j := strings.LastIndexByte(name, ':'); j > 0 && (name[j+1:] == "ro" || name[j+1:] == "rw") {
			name = name[:j]
		}
		path := fmt.Sprintf("%s[%d]", at.path, i)
		if strings.HasPrefix(name, types.ContainerPrefix) {
			c.deny(path, ref, "other-containers", "the volumes of a container outside the sample")
			continue
		}
		if _, ok := c.proj.Services[strings.TrimPrefix(name, types.ServicePrefix)]; !ok {
			c.deny(path, ref, "other-containers", "not a service of the sample: the volumes of a container outside it")
		}
	}
}

// ruleSecurityOpt allows no-new-privileges and the default seccomp and AppArmor profiles.
// Anything else (unconfined, a custom profile, SELinux label options, systempaths) is the
// unconfined opt-in; a custom seccomp profile is also a host file compose reads, so it must
// come from the allowed roots.
func ruleSecurityOpt(c *checker, at site, v reflect.Value) {
	for i, opt := range v.Interface().([]string) {
		path := fmt.Sprintf("%s[%d]", at.path, i)
		key, val, profile := parseSecurityOpt(opt)
		switch {
		case strings.EqualFold(key, "no-new-privileges"):
			continue
		case key == "seccomp" && val == "builtin", key == "apparmor" && val == "docker-default":
			continue
		}
		why := "changes the container's confinement"
		switch {
		case strings.EqualFold(val, "unconfined") || strings.EqualFold(key, "label") && strings.EqualFold(val, "disable"):
			why = "turns confinement off"
		case profile != "":
			why = "a custom seccomp profile, which may allow any system call"
		}
		c.deny(path, opt, "unconfined", why)
		if profile != "" {
			c.hostPath(path, opt, c.seccompPath(profile), false)
		}
	}
}

// parseSecurityOpt splits key=value (or the older key:value) and, for a seccomp value compose
// would read as a file, returns that file as written.
func parseSecurityOpt(opt string) (key, val, profile string) {
	o := strings.TrimSpace(opt)
	k, v, ok := strings.Cut(o, "=")
	if !ok {
		k, v, _ = strings.Cut(o, ":")
	}
	key, val = strings.TrimSpace(k), strings.TrimSpace(v)
	// compose reads the profile itself, for this exact key and anything but these values.
	if k == "seccomp" && v != "unconfined" && v != "builtin" && v != "" {
		profile = v
	}
	return key, val, profile
}

// seccompPath is the file compose reads for a seccomp profile: relative to the project.
func (c *checker) seccompPath(profile string) string {
	if filepath.IsAbs(profile) || c.proj.WorkingDir == "" {
		return profile
	}
	return filepath.Join(c.proj.WorkingDir, profile)
}

// ipcSysctls are the IPC-namespaced sysctls Docker accepts (besides fs.mqueue.*).
var ipcSysctls = []string{
	"kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem",
	"kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
}

// ruleSysctls allows the sysctls that are namespaced, so that they change the container's own
// network or IPC namespace: net.* (unless the service shares the host's network) and the IPC
// ones (unless it shares the host's IPC namespace).
func ruleSysctls(c *checker, at site, v reflect.Value) {
	s := c.service()
	hostNet := strings.EqualFold(s.NetworkMode, "host") || strings.EqualFold(s.Net, "host")
	hostIPC := strings.EqualFold(s.Ipc, "host")
	m := v.Interface().(types.Mapping)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		name := strings.ReplaceAll(strings.TrimSpace(k), "/", ".")
		switch {
		case strings.HasPrefix(name, "net.") && !hostNet:
		case (slices.Contains(ipcSysctls, name) || strings.HasPrefix(name, "fs.mqueue.")) && !hostIPC:
		default:
			c.deny(at.path+"."+k, m[k], "sysctls", "a kernel setting that is not namespaced to the container")
		}
	}
}

func ruleRuntime(c *checker, at site, v reflect.Value) {
	val := strings.TrimSpace(v.String())
	field := at.path[strings.LastIndexByte(at.path, '.')+1:]
	switch {
	case field == "runtime" && (val == "runc" || val == "io.containerd.runc.v2"):
	case field == "isolation" && strings.EqualFold(val, "default"):
	default:
		c.deny(at.path, val, "runtime", "a container runtime other than runc")
	}
}

func ruleLoggingDriver(c *checker, at site, v reflect.Value) {
	switch d := strings.TrimSpace(v.String()); d {
	case "json-file", "local", "none":
	default:
		c.deny(at.path, d, "logging", "sends the container's output to an address or daemon of the host")
	}
}

func ruleOOMScore(c *checker, at site, v reflect.Value) {
	if n := v.Int(); n < 0 {
		c.deny(at.path, fmt.Sprint(n), "host-priority", "the kernel kills host processes before this container")
	}
}

func ruleVolumeType(c *checker, at site, v reflect.Value) {
	switch t := v.String(); t {
	case types.VolumeTypeBind, types.VolumeTypeVolume, types.VolumeTypeTmpfs:
	case types.VolumeTypeImage:
		c.deny(at.path, t, "image-volumes", "mounts an image's content")
	default:
		c.add(at.path, t, "volume-type", "a volume type the Linux engine does not offer", "")
	}
}

func ruleBindSource(c *checker, at site, v reflect.Value) {
	vol := at.parent.Interface().(types.ServiceVolumeConfig)
	if vol.Type != types.VolumeTypeBind {
		return
	}
	c.hostPath(at.path, vol.Source, vol.Source, true)
}

func rulePropagation(c *checker, at site, v reflect.Value) {
	switch p := strings.TrimSpace(v.String()); p {
	case types.PropagationPrivate, types.PropagationRPrivate, types.PropagationSlave, types.PropagationRSlave:
	default:
		c.deny(at.path, p, "host-namespaces", "mounts made in the container propagate to the host")
	}
}

func ruleBuildContext(c *checker, at site, v reflect.Value) {
	ctx := v.String()
	if isRemoteContext(ctx) || strings.Contains(ctx, "://") {
		c.add(at.path, ctx, "build-context", "a remote build context, which the engine would fetch: composebox builds from local directories", "")
		return
	}
	c.hostPath(at.path, ctx, ctx, false)
}

func ruleDockerfile(c *checker, at site, v reflect.Value) {
	b := at.parent.Interface().(types.BuildConfig)
	if b.DockerfileInline != "" || isRemoteContext(b.Context) || strings.Contains(b.Context, "://") {
		return
	}
	c.hostPath(at.path, b.Dockerfile, DockerfilePath(&b), false)
}

func ruleAdditionalContexts(c *checker, at site, v reflect.Value) {
	m := v.Interface().(types.Mapping)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		ctx := m[k]
		if strings.Contains(ctx, "://") || strings.HasPrefix(ctx, types.ServicePrefix) || isRemoteContext(ctx) {
			continue // images, stages and URLs: the classic builder refuses them anyway
		}
		c.hostPath(at.path+"."+k, ctx, ctx, false)
	}
}

// ruleFile checks host paths given as a string or a list of strings. bind says the file is
// mounted into a container (secret and config files are).
func ruleFile(bind bool) func(c *checker, at site, v reflect.Value) {
	return func(c *checker, at site, v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			c.hostPath(at.path, v.String(), v.String(), bind)
		case reflect.Slice:
			for i := range v.Len() {
				p := v.Index(i).String()
				c.hostPath(fmt.Sprintf("%s[%d]", at.path, i), p, p, bind)
			}
		}
	}
}

// ruleObjectEnvironment: a secret or config taken from a variable needs that variable, which
// only the runner can give. One defined in an included file may take it from the include's
// env_file: compose-go then puts the value in the object's content, as compose reads it.
func ruleObjectEnvironment(c *checker, at site, v reflect.Value) {
	name := v.String()
	if content := at.parent.FieldByName("Content"); content.IsValid() && content.String() != "" {
		return
	}
	if _, ok := c.proj.Environment[name]; !ok {
		c.invalid(at.path, name, "variables", "the variable "+name+" is not set", variableFix(name))
	}
}

func ruleEntitlements(c *checker, at site, v reflect.Value) {
	for i, e := range v.Interface().([]string) {
		path := fmt.Sprintf("%s[%d]", at.path, i)
		switch strings.ToLower(strings.TrimSpace(e)) {
		case "network.host":
			c.deny(path, e, "host-network", "the host's network during the build")
		default:
			c.deny(path, e, "privileged", "extra privileges for the build")
		}
	}
}

func ruleBuildNetwork(c *checker, at site, v reflect.Value) {
	raw := v.String()
	switch n := strings.ToLower(strings.TrimSpace(raw)); {
	case n == "default" || n == "bridge" || n == "none":
	case n == "host":
		c.deny(at.path, raw, "host-network", "the host's network during the build")
	default:
		c.deny(at.path, raw, "other-containers", "builds on a network outside the sample")
	}
}

// ruleHostIP allows a published port on a loopback address only: one on 0.0.0.0, :: or an
// interface's address is reachable from other hosts and from every container that can reach
// the host, other samples included. An empty host_ip is published on 127.0.0.1 (see adapt).
func ruleHostIP(c *checker, at site, v reflect.Value) {
	raw := v.String()
	if raw == "" || loopbackHost(raw) {
		return
	}
	c.deny(at.path, raw, "public-ports", "a published port on a host address other than loopback")
}

// loopbackHost reports a loopback address (127.0.0.0/8, ::1) or localhost.
func loopbackHost(s string) bool {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

func ruleNetworkDriver(c *checker, at site, v reflect.Value) {
	switch d := strings.TrimSpace(v.String()); d {
	case "bridge", "none":
	case "host":
		c.deny(at.path, d, "host-network", "the host's network namespace")
	default:
		c.deny(at.path, d, "network-drivers", "a network driver other than bridge")
	}
}

func ruleIPAMDriver(c *checker, at site, v reflect.Value) {
	if d := strings.TrimSpace(v.String()); d != "default" {
		c.deny(at.path, d, "network-drivers", "an IPAM driver other than the default")
	}
}

// ruleExternalNetwork: an external network is given its own copy per sample by normalisation,
// but the network "host" is the host's namespace whatever it is called in the file.
func ruleExternalNetwork(c *checker, at site, v reflect.Value) {
	n := at.parent.Interface().(types.NetworkConfig)
	key := at.path[strings.IndexByte(at.path, '.')+1 : strings.LastIndexByte(at.path, '.')]
	name := cmpOr(n.Name, key)
	if name == "host" {
		c.deny(at.path, "true (name host)", "host-network", "the host's network namespace")
	}
}

func ruleVolumeDriver(c *checker, at site, v reflect.Value) {
	if d := strings.TrimSpace(v.String()); d != "local" {
		c.deny(at.path, d, "volume-driver-opts", "a volume driver other than local")
	}
}

// tmpfsOptions are the mount options of a local tmpfs volume that change nothing on the host.
var tmpfsOptions = []string{"size", "mode", "uid", "gid", "nr_inodes", "nr_blocks", "noexec", "nosuid", "nodev", "ro", "rw"}

// ruleVolumeDriverOpts allows a local volume's options only for a tmpfs (type and device tmpfs,
// size, mode and ownership options). Anything else mounts a host device, a network share or a
// host directory, which is the volume-driver-opts opt-in; a host directory (o: bind) must also
// come from the allowed roots, opt-in or not.
func ruleVolumeDriverOpts(c *checker, at site, v reflect.Value) {
	vol := at.parent.Interface().(types.VolumeConfig)
	opts := vol.DriverOpts
	tmpfs := true
	for k, val := range opts {
		switch k {
		case "type", "device":
			tmpfs = tmpfs && val == "tmpfs"
		case "o":
			for o := range strings.SplitSeq(val, ",") {
				name, _, _ := strings.Cut(strings.TrimSpace(o), "=")
				tmpfs = tmpfs && slices.Contains(tmpfsOptions, name)
			}
		default:
			tmpfs = false
		}
	}
	if !tmpfs {
		c.deny(at.path, render(v), "volume-driver-opts", "mounts a host device, directory or network share")
	}
	if dev, ok := bindDevice(vol); ok {
		c.hostPath(at.path+".device", dev, dev, true)
	}
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

// variableFix says how to give composebox a variable.
func variableFix(name string) string {
	return fmt.Sprintf("--var %s=VALUE, --env-file FILE or --pass-env %s", name, name)
}

// VolumeString is a service volume as a policy violation shows it: source:target[:ro].
func VolumeString(v types.ServiceVolumeConfig) string {
	s := v.Source + ":" + v.Target
	if v.ReadOnly {
		s += ":ro"
	}
	return s
}

// IsHost reports a namespace or network mode of "host", the host's own.
func IsHost(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "host") }

// ruleLabels refuses the label keys composebox itself sets and trusts: its own (dev.composebox.*)
// and compose's (com.docker.compose.*). A project that set one could pass for a sample it is
// not (another project, a detached or pooled sample, a base image) in `ls`, `cleanup` and the
// pool.
func ruleLabels(c *checker, at site, v reflect.Value) {
	m, ok := v.Interface().(types.Labels)
	if !ok {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if reservedLabel(k) {
			c.add(at.path+"."+k, m[k], "labels", "a label composebox sets on what it creates; a project may not set it", "")
		}
	}
}

// reservedLabel reports a label key that only composebox and compose may set.
func reservedLabel(k string) bool {
	k = strings.ToLower(strings.TrimSpace(k))
	return strings.HasPrefix(k, "dev.composebox.") || strings.HasPrefix(k, "com.docker.compose.")
}

// realtimeUlimits raise a container's scheduling priority over the host's processes: rtprio
// lets it take a real-time policy, nice lets it raise its own priority, neither needing
// CAP_SYS_NICE.
var realtimeUlimits = []string{"rtprio", "nice"}

// ruleUlimits: a ulimit is the container's own resource bound, except the two that put it
// ahead of the host's processes. The table walks the entries themselves (ruleWalk).
func ruleUlimits(c *checker, at site, v reflect.Value) {
	for _, k := range v.MapKeys() {
		name := strings.ToLower(strings.TrimSpace(k.String()))
		if slices.Contains(realtimeUlimits, name) {
			c.deny(at.path+"."+k.String(), render(v.MapIndex(k)), "host-priority", "raises the container's scheduling priority above the host's processes")
		}
	}
}
