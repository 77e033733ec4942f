// Package containerspec is composebox's single-container layer. Harnesses that run one
// container (a long-lived one that commands are exec'd into, or a `docker run --rm` per
// command) describe it as a Spec: an image or build, a workspace and other mounts, the
// environment and user, limits, a network and ports, setup commands and extra `docker run`
// flags. A Spec is nothing but a generator of a one-service compose project: Project turns it
// into a *types.Project that goes through the same load, policy, normalisation, up, exec and
// cleanup as every other task. There is no second engine path. CheckProject is the policy
// check adapted to a Spec's own binds.
//
// The package is pure logic: nothing here talks to a Docker daemon. Package orchestrator
// re-exports its types (orchestrator.ContainerSpec and the rest) next to the verbs that run
// them.
package containerspec

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// Network modes of a Spec.
const (
	// NetworkNone gives the container only a loopback interface: the default.
	NetworkNone = "none"
	// NetworkBridge puts the container on the engine's default bridge, with outbound access
	// and published ports. No project network is created.
	NetworkBridge = "bridge"
	// NetworkHost shares the host's network stack. The default policy forbids it; on a
	// non-Linux host it falls back to NetworkBridge.
	NetworkHost = "host"
)

const (
	// DefaultWorkdir is the working directory of a spec that names none.
	DefaultWorkdir = "/workspace"
	// StaticRoot is where static assets are mounted, read-only, as StaticRoot/<save_path>.
	StaticRoot = "/static"
	// DefaultName names the task of a spec that names none.
	DefaultName = "container"
	// minMemoryMB is the engine's smallest memory limit: below it, container create fails.
	minMemoryMB = 6
)

// Spec describes a single-container sandbox: the image, the workspace and other
// mounts, the environment and user, the limits, the network, and the commands that prepare it.
// The zero value runs composebox's base image with no network, working in /workspace.
//
// A spec is pure data; Project turns it into a compose project.
type Spec struct {
	// Name names the task in labels and in project names (cbx-<name>-<id>). Default
	// "container".
	Name string `json:"name,omitempty" yaml:"name,omitempty"`

	// Image is the image to run. It must be present locally: composebox never pulls. With
	// neither Image nor Build, the default image runs (composebox's base image unless the
	// orchestrator is given another).
	Image string `json:"image,omitempty" yaml:"image,omitempty"`
	// Build builds the image from a Dockerfile instead, once per content hash, as a task's
	// `build:` service is.
	Build *Build `json:"build,omitempty" yaml:"build,omitempty"`

	// Workdir is the working directory in the container, where the workspace is mounted and
	// where commands run. Default /workspace.
	Workdir string `json:"workdir,omitempty" yaml:"workdir,omitempty"`
	// Workspace is a host directory mounted read-write at Workdir, so that the container's
	// file edits land on the host without a copy step. Relative mount and
	// asset sources resolve against it. Empty means no workspace.
	Workspace string `json:"workspace,omitempty" yaml:"workspace,omitempty"`
	// NoWorkspaceMount keeps the workspace unmounted while relative paths still resolve
	// against it (a harness's mount_workspace: false).
	NoWorkspaceMount bool `json:"no_workspace_mount,omitempty" yaml:"no_workspace_mount,omitempty"`
	// Mounts are more bind mounts. They override the workspace at the same container path,
	// and are overridden by per-spawn mounts and by assets. None may be at or under Workdir.
	Mounts []Mount `json:"mounts,omitempty" yaml:"mounts,omitempty"`
	// Assets are host files or directories mounted read-only at /static/<SavePath>.
	Assets []Asset `json:"assets,omitempty" yaml:"assets,omitempty"`

	// Env is the container's environment.
	Env map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// User is the user commands run as: a name or uid[:gid]. Empty means the image's.
	User string `json:"user,omitempty" yaml:"user,omitempty"`
	// HostUser runs the container as the host's uid:gid (HUID/HGID), so that what
	// it writes in the workspace belongs to the host user. HUID and HGID are passed in its
	// environment. CurrentHostUser gives this process's. It excludes User.
	HostUser *HostUser `json:"host_user,omitempty" yaml:"host_user,omitempty"`

	// MemoryMB is the memory limit in MiB (0: none; at least 6 otherwise).
	MemoryMB int64 `json:"memory_mb,omitempty" yaml:"memory_mb,omitempty"`
	// CPUs is the CPU limit, in CPUs (0: none).
	CPUs float64 `json:"cpus,omitempty" yaml:"cpus,omitempty"`
	// Pids is the limit on the number of processes (0: none).
	Pids int64 `json:"pids,omitempty" yaml:"pids,omitempty"`

	// Network is NetworkNone (the default), NetworkBridge or NetworkHost.
	Network string `json:"network,omitempty" yaml:"network,omitempty"`
	// Ports are published in bridge mode (and ignored in host mode). A loopback bind address
	// is rewritten to 0.0.0.0.
	Ports []PublishedPort `json:"ports,omitempty" yaml:"ports,omitempty"`

	// Setup are shell commands (run with sh -c, in Workdir, as the user) that prepare a new
	// container before its first command. Project ignores them: the orchestrator
	// runs them once the container is up.
	Setup []string `json:"setup,omitempty" yaml:"setup,omitempty"`

	// ExtraArgs are further `docker run` flags. The dangerous ones are rejected before
	// anything starts; the supported ones are listed in the README, and anything
	// else is an errdefs.ErrInvalidConfig.
	ExtraArgs []string `json:"extra_args,omitempty" yaml:"extra_args,omitempty"`
}

// Build builds a spec's image from a Dockerfile.
type Build struct {
	// Context is the build context directory. A relative one resolves against the current
	// directory.
	Context string `json:"context,omitempty" yaml:"context,omitempty"`
	// Dockerfile is the Dockerfile's path, relative to Context. Default "Dockerfile".
	Dockerfile string `json:"dockerfile,omitempty" yaml:"dockerfile,omitempty"`
	// Args are build arguments.
	Args map[string]string `json:"args,omitempty" yaml:"args,omitempty"`
}

// Mount is one bind mount: a host path at a container path. In JSON and YAML it is either the
// string "host:container[:ro|rw]" or an object with source, target and read_only.
type Mount struct {
	// Source is the host path. A relative one resolves against the workspace.
	Source string `json:"source" yaml:"source"`
	// Target is the absolute container path.
	Target string `json:"target" yaml:"target"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"read_only,omitempty" yaml:"read_only,omitempty"`
}

// ParseMount parses "host:container[:ro|rw]".
func ParseMount(s string) (Mount, error) {
	parts := strings.Split(s, ":")
	var m Mount
	switch len(parts) {
	case 3:
		switch parts[2] {
		case "ro":
			m.ReadOnly = true
		case "rw":
		default:
			return Mount{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("parse mount %q: mode %q: want ro or rw", s, parts[2]))
		}
		fallthrough
	case 2:
		m.Source, m.Target = parts[0], parts[1]
	default:
		return Mount{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("parse mount %q: want HOST:CONTAINER[:ro|rw]", s))
	}
	if m.Source == "" || m.Target == "" {
		return Mount{}, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("parse mount %q: want HOST:CONTAINER[:ro|rw]", s))
	}
	return m, nil
}

// String is the mount in ParseMount's form.
func (m Mount) String() string {
	s := m.Source + ":" + m.Target
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

// mountFields keeps the struct form decodable without recursing into the custom decoders.
type mountFields Mount

// UnmarshalJSON accepts the string form as well as the object form.
func (m *Mount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		parsed, err := ParseMount(s)
		if err != nil {
			return err
		}
		*m = parsed
		return nil
	}
	return json.Unmarshal(b, (*mountFields)(m))
}

// UnmarshalYAML accepts the string form as well as the mapping form.
func (m *Mount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		parsed, err := ParseMount(n.Value)
		if err != nil {
			return err
		}
		*m = parsed
		return nil
	}
	return n.Decode((*mountFields)(m))
}

// Asset is a static asset: a host file or directory mounted read-only at /static/<SavePath>.
type Asset struct {
	// Source is the host path. A relative one resolves against the workspace.
	Source string `json:"source" yaml:"source"`
	// SavePath is the relative path under /static.
	SavePath string `json:"save_path" yaml:"save_path"`
}

// HostUser is a host uid and gid that a container runs as.
type HostUser struct {
	UID int `json:"uid" yaml:"uid"`
	GID int `json:"gid" yaml:"gid"`
}

// CurrentHostUser is this process's uid and gid.
func CurrentHostUser() HostUser { return HostUser{UID: os.Getuid(), GID: os.Getgid()} }

// PublishedPort publishes a container port on the host.
type PublishedPort struct {
	// HostIP is the host address to bind ("" means 127.0.0.1). An address other than loopback
	// needs the policy's public-ports opt-in.
	HostIP string `json:"host_ip,omitempty" yaml:"host_ip,omitempty"`
	// HostPort is the host port; 0 lets the engine choose one.
	HostPort int `json:"host_port,omitempty" yaml:"host_port,omitempty"`
	// ContainerPort is the port in the container.
	ContainerPort int `json:"container_port" yaml:"container_port"`
	// Protocol is tcp (the default), udp or sctp.
	Protocol string `json:"protocol,omitempty" yaml:"protocol,omitempty"`
}

// ParsePublishedPort parses docker's short form, [[IP:]HOSTPORT:]CONTAINERPORT[/PROTO]; a range
// gives one port per number.
func ParsePublishedPort(s string) ([]PublishedPort, error) {
	cfgs, err := types.ParsePortConfig(s)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("parse port %q", s))
	}
	out := make([]PublishedPort, 0, len(cfgs))
	for _, c := range cfgs {
		p := PublishedPort{HostIP: c.HostIP, ContainerPort: int(c.Target), Protocol: c.Protocol}
		if c.Published != "" {
			if p.HostPort, err = strconv.Atoi(c.Published); err != nil {
				return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("parse port %q: host port %q", s, c.Published))
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// EffectiveNetwork is the network mode a spec gets on a host of the given GOOS: "" means
// NetworkNone, and NetworkHost becomes NetworkBridge off Linux, where Docker Desktop has no
// host networking. Anything else is an errdefs.ErrInvalidConfig.
func EffectiveNetwork(mode, goos string) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(mode)); m {
	case "", NetworkNone:
		return NetworkNone, nil
	case NetworkBridge:
		return NetworkBridge, nil
	case NetworkHost:
		if goos != "linux" {
			return NetworkBridge, nil
		}
		return NetworkHost, nil
	}
	return "", errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("container spec: network %q: want none, bridge or host", mode))
}

// EffectiveAddress is the address to bind in the given network mode. In bridge mode a port that
// names no address, or localhost, binds 127.0.0.1: the engine's own default, every address,
// would let other hosts and every container that can reach the host (other samples included)
// dial it. A loopback address stays as it is: the engine forwards from the host's loopback to
// the container's bridge interface. Other addresses need the policy's public-ports opt-in.
func EffectiveAddress(addr, network string) string {
	if network != NetworkBridge {
		return addr
	}
	if addr == "" || strings.EqualFold(addr, "localhost") {
		return "127.0.0.1"
	}
	return strings.Trim(addr, "[]")
}

// Options are what one spawn of a spec adds to it. The zero value adds nothing.
type Options struct {
	// Mounts are per-spawn mounts: above the spec's, replacing one at the same container path
	//. Only assets override them.
	Mounts []Mount
	// Ports are per-spawn ports, replacing the spec's for the same container port and protocol.
	Ports []PublishedPort
	// Env is per-spawn environment, over the spec's.
	Env map[string]string
	// DefaultImage runs a spec naming neither Image nor Build. Empty means composebox's base
	// image.
	DefaultImage string
}

// Project turns a spec into a one-service compose project (service "default"): the
// image or build, a keep-alive command with `init: true` and a 1 s stop grace (so that
// commands are exec'd into a long-lived container and removal is immediate), the working
// directory, the merged bind mounts, the environment, the user, the limits, the network and
// its ports, and the supported extra run args.
//
// Mounts merge in layers, a later source replacing an earlier one at the same
// container path: the workspace at Workdir, then spec mounts, then per-spawn mounts, then the
// assets at /static/<save_path> (read-only). Relative host paths resolve against the
// workspace. A mount or asset at or under Workdir is an errdefs.ErrInvalidConfig, as is a missing
// host path (the engine would create it as an empty root-owned directory). A dangerous extra
// run arg is an errdefs.ErrPolicyViolation, reported before anything else.
//
// The project's working directory is the smallest host directory holding every bind source,
// so that the task-level policy check admits exactly these binds; CheckProject is
// the precise check. Nothing touches the engine.
func Project(spec Spec, opts Options) (*types.Project, error) {
	if err := CheckExtraArgs(spec.ExtraArgs); err != nil {
		return nil, err
	}
	g := containerGen{spec: spec}
	svc, err := g.service(opts)
	if err != nil {
		return nil, err
	}
	name := compose.SanitizeName(spec.Name, 40)
	if name == "" {
		name = DefaultName
	}
	p := &types.Project{
		Name:       name,
		WorkingDir: g.projectDir(),
		Services:   types.Services{compose.DefaultServiceName: svc},
	}
	if g.network == NetworkBridge {
		p.Networks = types.Networks{"default": {Name: name + "_default"}}
	}
	return p, nil
}

// TaskName is the task name of a spec: its Name, sanitised, or "container".
func TaskName(spec Spec) string {
	if n := compose.SanitizeName(spec.Name, 40); n != "" {
		return n
	}
	return DefaultName
}

// containerGen carries what one generation has resolved so far.
type containerGen struct {
	spec      Spec
	workspace string   // absolute, or ""
	workdir   string   // absolute POSIX
	sources   []string // host sources of every bind, absolute
	network   string
}

func invalid(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalidConfig, "container spec: "+fmt.Sprintf(format, args...))
}

func (g *containerGen) service(opts Options) (types.ServiceConfig, error) {
	spec := g.spec
	svc := types.ServiceConfig{
		Name:            compose.DefaultServiceName,
		Command:         types.ShellCommand(compose.KeepAlive()),
		Init:            new(true),
		StopGracePeriod: new(types.Duration(time.Second)),
	}
	if err := g.image(&svc, opts.DefaultImage); err != nil {
		return svc, err
	}
	if err := g.paths(); err != nil {
		return svc, err
	}
	svc.WorkingDir = g.workdir
	vols, err := g.mounts(opts.Mounts)
	if err != nil {
		return svc, err
	}
	svc.Volumes = vols

	mode, err := EffectiveNetwork(spec.Network, runtime.GOOS)
	if err != nil {
		return svc, err
	}
	g.network = mode
	svc.NetworkMode = mode
	if mode == NetworkBridge {
		// Not the engine's default bridge, which every container on the host shares and the
		// host firewall cannot cover without touching all of them: the project's own default
		// network, a bridge like it that composebox creates, firewalls and removes with the task.
		svc.NetworkMode = ""
		svc.Networks = map[string]*types.ServiceNetworkConfig{"default": nil}
	}

	// The extra args come first, so that the spec's typed fields are not overridden by them.
	args, err := parseRunArgs(spec.ExtraArgs)
	if err != nil {
		return svc, err
	}
	args.apply(&svc)

	env := map[string]string{}
	maps.Copy(env, args.env)
	maps.Copy(env, spec.Env)
	maps.Copy(env, opts.Env)
	if err := g.user(&svc, env); err != nil {
		return svc, err
	}
	if len(env) > 0 {
		svc.Environment = types.MappingWithEquals{}
		for k, v := range env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return svc, invalid("environment variable %q: invalid name or value", k)
			}
			svc.Environment[k] = new(v)
		}
	}
	if err := g.limits(&svc); err != nil {
		return svc, err
	}
	ports, err := g.ports(spec.Ports, opts.Ports)
	if err != nil {
		return svc, err
	}
	svc.Ports = ports
	return svc, nil
}

func (g *containerGen) image(svc *types.ServiceConfig, defaultImage string) error {
	spec := g.spec
	switch {
	case spec.Image != "" && spec.Build != nil:
		return invalid("both image %q and a build are given: choose one", spec.Image)
	case spec.Build != nil:
		if spec.Build.Context == "" {
			return invalid("build: no context directory")
		}
		ctxDir, err := filepath.Abs(spec.Build.Context)
		if err != nil {
			return invalid("build context %s: %v", spec.Build.Context, err)
		}
		if fi, err := os.Stat(ctxDir); err != nil || !fi.IsDir() {
			return invalid("build context %s: not a directory", ctxDir)
		}
		df := spec.Build.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		svc.Build = &types.BuildConfig{Context: ctxDir, Dockerfile: df, Args: types.MappingWithEquals{}}
		for k, v := range spec.Build.Args {
			svc.Build.Args[k] = new(v)
		}
		// As for a lone Dockerfile (load.go): the base image's tag is a content hash that no
		// Dockerfile could spell, so it comes in as a build arg.
		if _, set := svc.Build.Args[compose.BaseImageEnv]; !set {
			if ref, err := imagespec.BaseRef(imagespec.DefaultBusybox); err == nil {
				svc.Build.Args[compose.BaseImageEnv] = new(ref)
			}
		}
	case spec.Image != "":
		svc.Image = spec.Image
	case defaultImage != "":
		svc.Image = defaultImage
	default:
		ref, err := imagespec.BaseRef(imagespec.DefaultBusybox)
		if err != nil {
			return errdefs.Wrap(errdefs.ErrPrerequisite, err, "container spec: no image given and no default image")
		}
		svc.Image = ref
	}
	return nil
}

// paths resolves the workspace and the working directory.
func (g *containerGen) paths() error {
	wd := g.spec.Workdir
	if wd == "" {
		wd = DefaultWorkdir
	}
	if !path.IsAbs(wd) {
		return invalid("workdir %q: want an absolute container path", wd)
	}
	g.workdir = path.Clean(wd)
	if g.spec.Workspace != "" {
		ws, err := filepath.Abs(g.spec.Workspace)
		if err != nil {
			return invalid("workspace %s: %v", g.spec.Workspace, err)
		}
		fi, err := os.Stat(ws)
		if err != nil || !fi.IsDir() {
			return invalid("workspace %s: no such directory", ws)
		}
		g.workspace = ws
	}
	if g.workdir == "/" && g.workspace != "" && !g.spec.NoWorkspaceMount {
		return invalid("workdir /: the workspace cannot be mounted over the container's root")
	}
	return nil
}

// mountLayer is one source of mounts in the merge order.
type mountLayer struct {
	what   string
	mounts []Mount
}

// mounts merges the binds in layers (see Project); a later layer replaces an earlier one at the
// same container path.
func (g *containerGen) mounts(spawn []Mount) ([]types.ServiceVolumeConfig, error) {
	byTarget := map[string]Mount{}
	if g.workspace != "" && !g.spec.NoWorkspaceMount {
		byTarget[g.workdir] = Mount{Source: g.workspace, Target: g.workdir}
	}
	assets := make([]Mount, 0, len(g.spec.Assets))
	for _, a := range g.spec.Assets {
		sp := strings.TrimSpace(a.SavePath)
		clean := path.Clean("/" + sp)
		if sp == "" || path.IsAbs(sp) || clean == "/" || slices.Contains(strings.Split(sp, "/"), "..") {
			return nil, invalid("asset %s: save path %q: want a relative path without ..", a.Source, a.SavePath)
		}
		assets = append(assets, Mount{Source: a.Source, Target: path.Join(StaticRoot, clean), ReadOnly: true})
	}
	for _, layer := range []mountLayer{{"mount", g.spec.Mounts}, {"spawn mount", spawn}, {"asset", assets}} {
		for _, m := range layer.mounts {
			resolved, err := g.resolveMount(layer.what, m)
			if err != nil {
				return nil, err
			}
			byTarget[resolved.Target] = resolved
		}
	}
	out := make([]types.ServiceVolumeConfig, 0, len(byTarget))
	for _, target := range slices.Sorted(maps.Keys(byTarget)) {
		m := byTarget[target]
		g.sources = append(g.sources, m.Source)
		out = append(out, types.ServiceVolumeConfig{
			Type:     types.VolumeTypeBind,
			Source:   m.Source,
			Target:   m.Target,
			ReadOnly: m.ReadOnly,
			Bind:     &types.ServiceVolumeBind{CreateHostPath: false},
		})
	}
	return out, nil
}

// resolveMount checks one mount and makes its source absolute.
func (g *containerGen) resolveMount(what string, m Mount) (Mount, error) {
	if m.Source == "" || m.Target == "" {
		return m, invalid("%s %q: want a host path and a container path", what, m.String())
	}
	if strings.ContainsAny(m.Source+m.Target, ":,\x00") {
		return m, invalid("%s %q: paths may not hold ':', ',' or NUL", what, m.String())
	}
	if !path.IsAbs(m.Target) {
		return m, invalid("%s %q: container path %s is not absolute", what, m.String(), m.Target)
	}
	m.Target = path.Clean(m.Target)
	if compose.Within(m.Target, g.workdir) {
		return m, invalid("%s %q: container path %s is at or under the workdir %s, where the workspace lives; mount it elsewhere",
			what, m.String(), m.Target, g.workdir)
	}
	src := m.Source
	if !filepath.IsAbs(src) {
		if g.workspace == "" {
			return m, invalid("%s %q: relative host path %s needs a workspace to resolve against", what, m.String(), src)
		}
		src = filepath.Join(g.workspace, src)
	}
	src = filepath.Clean(src)
	if _, err := os.Stat(src); err != nil {
		return m, invalid("%s %q: host path %s does not exist", what, m.String(), src)
	}
	m.Source = src
	return m, nil
}

// user sets the user, and HUID/HGID in host-uid mode.
func (g *containerGen) user(svc *types.ServiceConfig, env map[string]string) error {
	spec := g.spec
	if spec.User != "" {
		svc.User = spec.User
	}
	if spec.HostUser == nil {
		return nil
	}
	if spec.User != "" {
		return invalid("user %q and a host user are both given: choose one", spec.User)
	}
	hu := *spec.HostUser
	if hu.UID < 0 || hu.GID < 0 {
		return invalid("host user %d:%d: ids must not be negative", hu.UID, hu.GID)
	}
	svc.User = fmt.Sprintf("%d:%d", hu.UID, hu.GID)
	env["HUID"] = strconv.Itoa(hu.UID)
	env["HGID"] = strconv.Itoa(hu.GID)
	return nil
}

func (g *containerGen) limits(svc *types.ServiceConfig) error {
	spec := g.spec
	switch {
	case spec.MemoryMB < 0, spec.MemoryMB > 0 && spec.MemoryMB < minMemoryMB:
		return invalid("memory %d MB: want 0 (no limit) or at least %d", spec.MemoryMB, minMemoryMB)
	case spec.CPUs < 0:
		return invalid("cpus %g: must not be negative", spec.CPUs)
	case spec.Pids < 0:
		return invalid("pids %d: must not be negative", spec.Pids)
	}
	if spec.MemoryMB > 0 {
		svc.MemLimit = types.UnitBytes(spec.MemoryMB << 20)
	}
	if spec.CPUs > 0 {
		svc.CPUS = float32(spec.CPUs)
	}
	if spec.Pids > 0 {
		svc.PidsLimit = spec.Pids
	}
	return nil
}

// ports merges spec and per-spawn ports; host networking ignores them and no
// network cannot publish any.
func (g *containerGen) ports(spec, spawn []PublishedPort) ([]types.ServicePortConfig, error) {
	type key struct {
		port  int
		proto string
	}
	merged := map[key]PublishedPort{}
	var order []key
	for _, p := range slices.Concat(spec, spawn) {
		if p.ContainerPort < 1 || p.ContainerPort > 65535 || p.HostPort < 0 || p.HostPort > 65535 {
			return nil, invalid("port %d:%d: out of range", p.HostPort, p.ContainerPort)
		}
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" && proto != "sctp" {
			return nil, invalid("port %d/%s: want tcp, udp or sctp", p.ContainerPort, p.Protocol)
		}
		if p.HostIP != "" && net.ParseIP(strings.Trim(p.HostIP, "[]")) == nil && !strings.EqualFold(p.HostIP, "localhost") {
			return nil, invalid("port %d: bind address %q is not an IP address", p.ContainerPort, p.HostIP)
		}
		p.Protocol = proto
		k := key{p.ContainerPort, proto}
		if _, seen := merged[k]; !seen {
			order = append(order, k)
		}
		merged[k] = p
	}
	if len(merged) == 0 {
		return nil, nil
	}
	switch g.network {
	case NetworkHost:
		return nil, nil // the container's ports are the host's
	case NetworkNone:
		return nil, invalid("%d published port(s) need network bridge, but the network is none", len(merged))
	}
	out := make([]types.ServicePortConfig, 0, len(order))
	for _, k := range order {
		p := merged[k]
		ip := EffectiveAddress(p.HostIP, g.network)
		if strings.EqualFold(ip, "localhost") {
			ip = "127.0.0.1"
		}
		pc := types.ServicePortConfig{Mode: "ingress", HostIP: strings.Trim(ip, "[]"), Target: uint32(p.ContainerPort), Protocol: p.Protocol}
		if p.HostPort > 0 {
			pc.Published = strconv.Itoa(p.HostPort)
		}
		out = append(out, pc)
	}
	return out, nil
}

// projectDir is the host directory the project belongs to: the workspace when every bind
// source lies in it, else the deepest directory holding all of them. The task-level policy
// check admits bind mounts from this directory only.
func (g *containerGen) projectDir() string {
	var dirs []string
	if g.workspace != "" {
		dirs = append(dirs, compose.ResolvePath(g.workspace))
	}
	for _, s := range g.sources {
		d := compose.ResolvePath(s)
		if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
			d = filepath.Dir(d) // a file: the project directory is where it lives
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		if wd, err := os.Getwd(); err == nil {
			return wd
		}
		return os.TempDir()
	}
	common := dirs[0]
	for _, d := range dirs[1:] {
		for !compose.Within(d, common) {
			common = filepath.Dir(common)
		}
	}
	return common
}
