package containerspec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
)

// Unit tests of the pure generation of single-container specs, one per behaviour that the
// harnesses running one container rely on.

const testImage = "composebox/test:1"

func genService(t *testing.T, spec Spec, opts Options) (*types.Project, types.ServiceConfig) {
	t.Helper()
	if spec.Image == "" && spec.Build == nil {
		spec.Image = testImage
	}
	p, err := Project(spec, opts)
	if err != nil {
		t.Fatalf("Project: %v", err)
	}
	if len(p.Services) != 1 {
		t.Fatalf("%d services, want one", len(p.Services))
	}
	return p, p.Services[compose.DefaultServiceName]
}

// binds is a service's bind mounts as "source:target[:ro]".
func binds(svc types.ServiceConfig) []string {
	var out []string
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeBind {
			out = append(out, compose.VolumeString(v))
		}
	}
	return out
}

// mkdirs makes dirs under root and returns root.
func mkdirs(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(root, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A keep-alive container with init, working in /workspace, without
// network (the default), on the given image.
func TestContainerProjectDefaults(t *testing.T) {
	p, svc := genService(t, Spec{}, Options{})
	if p.Name != DefaultName || !slices.Equal(svc.Command, compose.KeepAlive()) || svc.Init == nil || !*svc.Init ||
		svc.StopGracePeriod == nil || time.Duration(*svc.StopGracePeriod) != time.Second {
		t.Errorf("project %s, command %v, init %v, grace %v", p.Name, svc.Command, svc.Init, svc.StopGracePeriod)
	}
	if svc.Image != testImage || svc.WorkingDir != "/workspace" || svc.NetworkMode != NetworkNone {
		t.Errorf("image %q, workdir %q, network %q", svc.Image, svc.WorkingDir, svc.NetworkMode)
	}
	if len(svc.Volumes) != 0 || len(svc.Ports) != 0 || svc.User != "" || svc.MemLimit != 0 {
		t.Errorf("unexpected volumes %v, ports %v, user %q, memory %d", svc.Volumes, svc.Ports, svc.User, svc.MemLimit)
	}
	p, err := Project(Spec{Name: "My Task"}, Options{DefaultImage: "other:2"})
	if err != nil || p.Services[compose.DefaultServiceName].Image != "other:2" || p.Name != "my-task" {
		t.Errorf("default image: %v, %+v", err, p)
	}
}

// Volume merging order. Workspace (lowest) < spec mounts < per-spawn mounts (which
// override the same container path) < static assets; relative host paths resolve against the
// workspace.
func TestContainerMountMergeOrder(t *testing.T) {
	ws := mkdirs(t, "a", "b", "c", "assets")
	cases := []struct {
		name  string
		spec  Spec
		opts  Options
		want  []string
		notIn []string
	}{
		{
			name: "workspace at the workdir, read-write",
			spec: Spec{Workspace: ws},
			want: []string{ws + ":/workspace"},
		},
		{
			name: "mount_workspace false: no workspace mount, relative paths still resolve",
			spec: Spec{Workspace: ws, NoWorkspaceMount: true, Mounts: []Mount{{Source: "a", Target: "/data"}}},
			want: []string{ws + "/a:/data"},
		},
		{
			name: "spec mounts, relative to the workspace",
			spec: Spec{Workspace: ws, Mounts: []Mount{{Source: "a", Target: "/data", ReadOnly: true}}},
			want: []string{ws + "/a:/data:ro", ws + ":/workspace"},
		},
		{
			name: "per-spawn mount overrides the spec's at the same path",
			spec: Spec{Workspace: ws, Mounts: []Mount{{Source: "a", Target: "/data/config"}, {Source: "c", Target: "/other"}}},
			opts: Options{Mounts: []Mount{{Source: filepath.Join(ws, "b"), Target: "/data/config/"}}},
			want: []string{ws + "/b:/data/config", ws + "/c:/other", ws + ":/workspace"},
		},
		{
			name: "assets override per-spawn mounts, read-only under /static",
			spec: Spec{Workspace: ws, Assets: []Asset{{Source: "assets", SavePath: "tests/fixtures"}}},
			opts: Options{Mounts: []Mount{{Source: "a", Target: "/static/tests/fixtures"}}},
			want: []string{ws + "/assets:/static/tests/fixtures:ro", ws + ":/workspace"},
		},
		{
			name: "another workdir",
			spec: Spec{Workspace: ws, Workdir: "/workspace/wd", Mounts: []Mount{{Source: "a", Target: "/workspace/cache"}}},
			want: []string{ws + "/a:/workspace/cache", ws + ":/workspace/wd"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, svc := genService(t, c.spec, c.opts)
			if got := binds(svc); !slices.Equal(got, c.want) {
				t.Errorf("binds %v, want %v", got, c.want)
			}
		})
	}
}

// What a spec may not say, each a clear errdefs.ErrInvalidConfig before anything
// starts. A mount at or under the workdir is rejected.
func TestContainerProjectRejects(t *testing.T) {
	ws := mkdirs(t, "a")
	cases := []struct {
		name string
		spec Spec
		opts Options
		want string
	}{
		{"spec mount under the workdir", Spec{Workspace: ws, Mounts: []Mount{{Source: "a", Target: "/workspace/config"}}}, Options{}, "at or under the workdir /workspace"},
		{"spec mount at the workdir", Spec{Workspace: ws, Mounts: []Mount{{Source: "a", Target: "/workspace"}}}, Options{}, "at or under the workdir"},
		{"spawn mount under the workdir", Spec{Workspace: ws}, Options{Mounts: []Mount{{Source: "a", Target: "/workspace/x/../y"}}}, "at or under the workdir"},
		{"asset under the workdir", Spec{Workspace: ws, Workdir: "/static", Assets: []Asset{{Source: "a", SavePath: "x"}}}, Options{}, "at or under the workdir /static"},
		{"relative source without a workspace", Spec{Mounts: []Mount{{Source: "a", Target: "/data"}}}, Options{}, "needs a workspace"},
		{"missing source", Spec{Workspace: ws, Mounts: []Mount{{Source: "nope", Target: "/data"}}}, Options{}, "does not exist"},
		{"relative target", Spec{Workspace: ws, Mounts: []Mount{{Source: "a", Target: "data"}}}, Options{}, "not absolute"},
		{"colon in a path", Spec{Mounts: []Mount{{Source: ws, Target: "/a:b"}}}, Options{}, "may not hold"},
		{"asset save path escaping /static", Spec{Workspace: ws, Assets: []Asset{{Source: "a", SavePath: "../etc"}}}, Options{}, "save path"},
		{"absolute asset save path", Spec{Workspace: ws, Assets: []Asset{{Source: "a", SavePath: "/x"}}}, Options{}, "save path"},
		{"missing workspace", Spec{Workspace: filepath.Join(ws, "nope")}, Options{}, "no such directory"},
		{"relative workdir", Spec{Workdir: "work"}, Options{}, "absolute container path"},
		{"workspace over /", Spec{Workspace: ws, Workdir: "/"}, Options{}, "root"},
		{"image and build", Spec{Image: "x", Build: &Build{Context: ws}}, Options{}, "choose one"},
		{"missing build context", Spec{Build: &Build{Context: filepath.Join(ws, "nope")}}, Options{}, "not a directory"},
		{"unknown network", Spec{Network: "overlay"}, Options{}, "want none, bridge or host"},
		{"memory below the engine's minimum", Spec{MemoryMB: 4}, Options{}, "at least 6"},
		{"negative cpus", Spec{CPUs: -1}, Options{}, "cpus"},
		{"ports without network", Spec{Ports: []PublishedPort{{ContainerPort: 80}}}, Options{}, "need network bridge"},
		{"port out of range", Spec{Network: NetworkBridge, Ports: []PublishedPort{{ContainerPort: 70000}}}, Options{}, "out of range"},
		{"user and host user", Spec{User: "sandbox", HostUser: &HostUser{UID: 1, GID: 1}}, Options{}, "choose one"},
		{"bad env name", Spec{Env: map[string]string{"A=B": "c"}}, Options{}, "environment variable"},
		{"unknown extra arg", Spec{ExtraArgs: []string{"--device-read-bps", "x"}}, Options{}, "not supported"},
		{"extra arg with a typed field", Spec{ExtraArgs: []string{"--memory=1g"}}, Options{}, "MemoryMB"},
		{"extra arg that is no flag", Spec{ExtraArgs: []string{"python:3.11"}}, Options{}, "not a flag"},
		{"extra arg without its value", Spec{ExtraArgs: []string{"--tmpfs"}}, Options{}, "needs a value"},
		{"env extra arg without a value", Spec{ExtraArgs: []string{"-e", "HOME"}}, Options{}, "KEY=VALUE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.spec.Image == "" && c.spec.Build == nil {
				c.spec.Image = testImage
			}
			_, err := Project(c.spec, c.opts)
			if !errors.Is(err, errdefs.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want errdefs.ErrInvalidConfig containing %q", err, c.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "container spec: ") {
				t.Errorf("message %q does not start with the operation", err)
			}
		})
	}
}

// The dangerous-flag blocklist, in every form, with its wording: '<flag>' is blocked by
// sandbox policy.
func TestCheckExtraArgsBlocked(t *testing.T) {
	blocked := []struct {
		args []string
		flag string
	}{
		{[]string{"--privileged"}, "--privileged"},
		{[]string{"--privileged=true"}, "--privileged=true"},
		{[]string{"--pid=host"}, "--pid=host"},
		{[]string{"--pid", "host"}, "--pid host"},
		{[]string{"--network=host"}, "--network=host"},
		{[]string{"--network", "HOST"}, "--network HOST"},
		{[]string{"--net=host"}, "--net=host"},
		{[]string{"--ipc=host"}, "--ipc=host"},
		{[]string{"--ipc", "host"}, "--ipc host"},
		{[]string{"--uts=host"}, "--uts=host"},
		{[]string{"--uts", "host"}, "--uts host"},
		{[]string{"--userns=host"}, "--userns=host"},
		{[]string{"--cap-add=ALL"}, "--cap-add=ALL"},
		{[]string{"--cap-add", "all"}, "--cap-add all"},
		{[]string{"--cap-add=CAP_ALL"}, "--cap-add=CAP_ALL"},
		{[]string{"-v", "/:/host"}, "-v"},
		{[]string{"-v/:/host"}, "-v/:/host"},
		{[]string{"-v=/:/host"}, "-v=/:/host"},
		{[]string{"--volume", "/:/host"}, "--volume"},
		{[]string{"--volume=/:/host"}, "--volume=/:/host"},
		{[]string{"--mount", "type=bind,src=/,dst=/h"}, "--mount"},
		{[]string{"--mount=type=bind,src=/,dst=/h"}, "--mount=type=bind,src=/,dst=/h"},
		{[]string{"-e", "A=1", "--privileged"}, "--privileged"},
	}
	for _, c := range blocked {
		err := CheckExtraArgs(c.args)
		want := "'" + c.flag + "' is blocked by sandbox policy"
		if !errors.Is(err, errdefs.ErrPolicyViolation) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want errdefs.ErrPolicyViolation with %q", c.args, err, want)
		}
		// Project checks them before anything else.
		if _, err := Project(Spec{Image: testImage, Workdir: "relative", ExtraArgs: c.args}, Options{}); !errors.Is(err, errdefs.ErrPolicyViolation) {
			t.Errorf("%q: Project err %v, want the policy violation first", c.args, err)
		}
	}
	err := CheckExtraArgs([]string{"--privileged", "-v", "/:/h"})
	if err == nil || strings.Count(err.Error(), "is blocked by sandbox policy") != 2 {
		t.Errorf("two blocked flags: %v, want both named", err)
	}
	for _, ok := range [][]string{nil, {"--cap-add=NET_BIND_SERVICE"}, {"--ipc=private"}, {"--read-only"}, {"-e", "VOLUME=x"}, {"--volumes-from-not-a-flag"}} {
		if err := CheckExtraArgs(ok); err != nil {
			t.Errorf("%q: %v, want no policy violation", ok, err)
		}
	}
}

// The supported extra run args land in the compose service.
func TestContainerExtraArgsMapping(t *testing.T) {
	args := []string{
		"-e", "A=1", "--env=B=2", "-eC=3", "--cap-drop", "ALL", "--cap-add=NET_BIND_SERVICE", "--read-only",
		"--tmpfs", "/run:size=1m", "--shm-size=64m", "--ulimit", "nofile=1024:2048", "--ulimit=nproc=64",
		"--security-opt", "no-new-privileges", "-h", "box", "--dns=1.1.1.1", "--add-host", "db:10.0.0.2",
		"--sysctl", "net.ipv4.ip_forward=0", "--group-add=audio", "--entrypoint", "/bin/sh", "--label", "k=v",
		"--ipc=private", "--stop-timeout=3", "--init", "--rm",
	}
	_, svc := genService(t, Spec{ExtraArgs: args, Env: map[string]string{"B": "spec"}}, Options{Env: map[string]string{"C": "spawn"}})
	env := map[string]string{}
	for k, v := range svc.Environment {
		env[k] = *v
	}
	if !reflect.DeepEqual(env, map[string]string{"A": "1", "B": "spec", "C": "spawn"}) {
		t.Errorf("env %v: want extra args < spec < spawn", env)
	}
	if !slices.Equal(svc.CapDrop, []string{"ALL"}) || !slices.Equal(svc.CapAdd, []string{"NET_BIND_SERVICE"}) || !svc.ReadOnly {
		t.Errorf("caps %v %v, read-only %v", svc.CapDrop, svc.CapAdd, svc.ReadOnly)
	}
	if !slices.Equal(svc.Tmpfs, []string{"/run:size=1m"}) || svc.ShmSize != 64<<20 {
		t.Errorf("tmpfs %v, shm %d", svc.Tmpfs, svc.ShmSize)
	}
	if u := svc.Ulimits["nofile"]; u == nil || u.Soft != 1024 || u.Hard != 2048 {
		t.Errorf("ulimit nofile %+v", u)
	}
	if u := svc.Ulimits["nproc"]; u == nil || u.Single != 64 {
		t.Errorf("ulimit nproc %+v", u)
	}
	if !slices.Equal(svc.SecurityOpt, []string{"no-new-privileges"}) || svc.Hostname != "box" || !slices.Equal(svc.DNS, []string{"1.1.1.1"}) {
		t.Errorf("security_opt %v, hostname %q, dns %v", svc.SecurityOpt, svc.Hostname, svc.DNS)
	}
	if !slices.Equal(svc.ExtraHosts["db"], []string{"10.0.0.2"}) || svc.Sysctls["net.ipv4.ip_forward"] != "0" || !slices.Equal(svc.GroupAdd, []string{"audio"}) {
		t.Errorf("extra hosts %v, sysctls %v, group add %v", svc.ExtraHosts, svc.Sysctls, svc.GroupAdd)
	}
	if !slices.Equal(svc.Entrypoint, []string{"/bin/sh"}) || svc.Labels["k"] != "v" || svc.Ipc != "private" ||
		time.Duration(*svc.StopGracePeriod) != 3*time.Second {
		t.Errorf("entrypoint %v, labels %v, ipc %q, grace %v", svc.Entrypoint, svc.Labels, svc.Ipc, svc.StopGracePeriod)
	}
}

// HUID/HGID are passed in and the process runs as the host's uid:gid; the
// memory and cpu limits, and a pids limit.
func TestContainerUserAndLimits(t *testing.T) {
	_, svc := genService(t, Spec{HostUser: &HostUser{UID: 4321, GID: 4322}, MemoryMB: 512, CPUs: 1.5, Pids: 100}, Options{})
	if svc.User != "4321:4322" || *svc.Environment["HUID"] != "4321" || *svc.Environment["HGID"] != "4322" {
		t.Errorf("user %q, env %v", svc.User, svc.Environment)
	}
	if svc.MemLimit != 512<<20 || svc.CPUS != 1.5 || svc.PidsLimit != 100 {
		t.Errorf("limits %d %g %d", svc.MemLimit, svc.CPUS, svc.PidsLimit)
	}
	_, svc = genService(t, Spec{User: "1000:1000"}, Options{})
	if svc.User != "1000:1000" || svc.Environment["HUID"] != nil {
		t.Errorf("plain user %q, env %v", svc.User, svc.Environment)
	}
	if hu := CurrentHostUser(); hu.UID != os.Getuid() || hu.GID != os.Getgid() {
		t.Errorf("CurrentHostUser %+v", hu)
	}
}

// Effective_network_mode: host networking only on Linux, bridge elsewhere.
func TestEffectiveNetwork(t *testing.T) {
	cases := []struct{ mode, goos, want string }{
		{"", "linux", NetworkNone}, {"none", "darwin", NetworkNone}, {"bridge", "linux", NetworkBridge},
		{"host", "linux", NetworkHost}, {"host", "darwin", NetworkBridge}, {"HOST", "windows", NetworkBridge},
	}
	for _, c := range cases {
		if got, err := EffectiveNetwork(c.mode, c.goos); err != nil || got != c.want {
			t.Errorf("EffectiveNetwork(%q, %q) = %q, %v; want %q", c.mode, c.goos, got, err, c.want)
		}
	}
	if _, err := EffectiveNetwork("container:x", "linux"); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("container network: %v", err)
	}
}

// In bridge mode a port binds loopback unless it names another address; a loopback address is
// never widened to every address.
func TestEffectiveAddress(t *testing.T) {
	cases := []struct{ addr, network, want string }{
		{"127.0.0.1", NetworkBridge, "127.0.0.1"}, {"localhost", NetworkBridge, "127.0.0.1"}, {"127.0.0.53", NetworkBridge, "127.0.0.53"},
		{"::1", NetworkBridge, "::1"}, {"[::1]", NetworkBridge, "::1"}, {"10.0.0.1", NetworkBridge, "10.0.0.1"},
		{"", NetworkBridge, "127.0.0.1"}, {"127.0.0.1", NetworkHost, "127.0.0.1"}, {"127.0.0.1", NetworkNone, "127.0.0.1"},
	}
	for _, c := range cases {
		if got := EffectiveAddress(c.addr, c.network); got != c.want {
			t.Errorf("EffectiveAddress(%q, %q) = %q, want %q", c.addr, c.network, got, c.want)
		}
	}
}

// Port maps merge spec defaults with call-site overrides, bind loopback where they name no
// address, and host networking ignores them.
func TestContainerPorts(t *testing.T) {
	spec := Spec{Network: NetworkBridge, Ports: []PublishedPort{
		{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80},
		{ContainerPort: 53, Protocol: "udp"},
	}}
	_, svc := genService(t, spec, Options{Ports: []PublishedPort{{HostIP: "localhost", HostPort: 9090, ContainerPort: 80}}})
	want := []types.ServicePortConfig{
		{Mode: "ingress", HostIP: "127.0.0.1", Target: 80, Published: "9090", Protocol: "tcp"},
		{Mode: "ingress", HostIP: "127.0.0.1", Target: 53, Protocol: "udp"},
	}
	if !reflect.DeepEqual(svc.Ports, want) {
		t.Errorf("ports %+v, want %+v", svc.Ports, want)
	}
	spec.Network = NetworkHost
	if _, svc := genService(t, spec, Options{}); len(svc.Ports) != 0 || svc.NetworkMode != NetworkHost {
		t.Errorf("host network: ports %v, mode %q", svc.Ports, svc.NetworkMode)
	}
}

func TestParseMount(t *testing.T) {
	cases := []struct {
		in   string
		want Mount
		ok   bool
	}{
		{"/h:/c", Mount{Source: "/h", Target: "/c"}, true},
		{"rel:/c:ro", Mount{Source: "rel", Target: "/c", ReadOnly: true}, true},
		{"/h:/c:rw", Mount{Source: "/h", Target: "/c"}, true},
		{"/h:/c:rx", Mount{}, false},
		{"/h", Mount{}, false},
		{":/c", Mount{}, false},
		{"/a:/b:ro:x", Mount{}, false},
	}
	for _, c := range cases {
		got, err := ParseMount(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseMount(%q) = %+v, %v", c.in, got, err)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidConfig) {
			t.Errorf("ParseMount(%q): %v is not errdefs.ErrInvalidConfig", c.in, err)
		}
		if c.ok && got.String() != strings.TrimSuffix(c.in, ":rw") {
			t.Errorf("String() = %q", got.String())
		}
	}
}

// Extra_mounts may be a string or a struct (dict) in configs.
func TestMountDecodesStringOrStruct(t *testing.T) {
	want := []Mount{{Source: "/h", Target: "/c", ReadOnly: true}, {Source: "/x", Target: "/y"}}
	var fromJSON struct{ Mounts []Mount }
	if err := json.Unmarshal([]byte(`{"Mounts":["/h:/c:ro",{"source":"/x","target":"/y"}]}`), &fromJSON); err != nil || !slices.Equal(fromJSON.Mounts, want) {
		t.Errorf("JSON: %+v, %v", fromJSON.Mounts, err)
	}
	var fromYAML struct {
		Mounts []Mount `yaml:"mounts"`
	}
	if err := yaml.Unmarshal([]byte("mounts:\n  - /h:/c:ro\n  - {source: /x, target: /y}\n"), &fromYAML); err != nil || !slices.Equal(fromYAML.Mounts, want) {
		t.Errorf("YAML: %+v, %v", fromYAML.Mounts, err)
	}
	if err := json.Unmarshal([]byte(`{"Mounts":["nope"]}`), &fromJSON); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("bad string: %v", err)
	}
}

func TestParsePublishedPort(t *testing.T) {
	got, err := ParsePublishedPort("127.0.0.1:8080:80/udp")
	if err != nil || !slices.Equal(got, []PublishedPort{{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80, Protocol: "udp"}}) {
		t.Errorf("%+v, %v", got, err)
	}
	got, err = ParsePublishedPort("3000")
	if err != nil || !slices.Equal(got, []PublishedPort{{ContainerPort: 3000, Protocol: "tcp"}}) {
		t.Errorf("%+v, %v", got, err)
	}
	if _, err := ParsePublishedPort("x:y"); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("bad port: %v", err)
	}
}

// The generated project passes the default policy twice over: the precise check with the
// spec's own binds as roots, and, after a load through compose-go like TaskInit's, the task
// check with the project directory as root. Dangerous binds stay refused (the allowed
// mount roots, and the policy's docker socket rule).
func TestContainerProjectPassesDefaultPolicy(t *testing.T) {
	ws := mkdirs(t, "a")
	elsewhere := mkdirs(t, "data")
	asset := filepath.Join(elsewhere, "asset.txt")
	if err := os.WriteFile(asset, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Workspace: ws, Mounts: []Mount{{Source: "a", Target: "/cache"}, {Source: filepath.Join(elsewhere, "data"), Target: "/data", ReadOnly: true}},
		Assets: []Asset{{Source: asset, SavePath: "asset.txt"}}, MemoryMB: 64, Network: NetworkBridge,
		Ports: []PublishedPort{{HostIP: "127.0.0.1", ContainerPort: 80}}, ExtraArgs: []string{"--cap-drop=ALL"},
	}
	p, _ := genService(t, spec, Options{})
	if err := CheckProject(compose.DefaultPolicy(), p); err != nil {
		t.Fatalf("precise check: %v", err)
	}
	loaded, err := compose.Load(t.Context(), compose.FromProject(p), compose.LoadOptions{Environment: map[string]string{"COMPOSE_DISABLE_ENV_FILE": "true"}})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := compose.DefaultPolicy().Check(loaded); err != nil {
		t.Fatalf("task check after load: %v", err)
	}
	svc := loaded.Services[compose.DefaultServiceName]
	_, onDefault := svc.Networks["default"]
	if len(loaded.Networks) != 1 || svc.NetworkMode != "" || !onDefault || len(svc.Volumes) != 4 || svc.MemLimit != 64<<20 {
		t.Errorf("loaded: networks %v, mode %q, volumes %v, memory %d", loaded.Networks, svc.NetworkMode, svc.Volumes, svc.MemLimit)
	}
	// Network none: no project network either.
	p, _ = genService(t, Spec{}, Options{})
	if loaded, err := compose.Load(t.Context(), compose.FromProject(p), compose.LoadOptions{}); err != nil || len(loaded.Networks) != 0 {
		t.Errorf("network none: %v, networks %v", err, loaded.Networks)
	}

	refused := []struct {
		name string
		spec Spec
		pol  func(*compose.Policy)
		want string
	}{
		{"docker socket", Spec{Mounts: []Mount{{Source: "/var/run/docker.sock", Target: "/s"}}}, nil, "docker socket"},
		{"a directory holding the socket", Spec{Mounts: []Mount{{Source: "/run", Target: "/r"}}}, nil, "docker socket"},
		{"the kernel's /proc", Spec{Assets: []Asset{{Source: "/proc/self", SavePath: "p"}}}, nil, "kernel or engine path"},
		{"a whole /etc", Spec{Mounts: []Mount{{Source: "/etc", Target: "/e", ReadOnly: true}}}, nil, "whole system directory"},
		{"outside the operator's roots", Spec{Workspace: ws, Mounts: []Mount{{Source: elsewhere, Target: "/d"}}},
			func(p *compose.Policy) { p.AllowedMountRoots = []string{ws} }, "outside the allowed roots"},
		{"host network", Spec{Network: NetworkHost}, nil, "network_mode"},
		{"a dangerous capability", Spec{ExtraArgs: []string{"--cap-add=SYS_ADMIN"}}, nil, "cap_add"},
		{"unconfined seccomp", Spec{ExtraArgs: []string{"--security-opt", "seccomp=unconfined"}}, nil, "security_opt"},
	}
	for _, c := range refused {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil && strings.Contains(c.name, "socket") {
			continue // no socket on this machine: the mount fails as a missing path instead
		}
		c.spec.Image = testImage
		p, err := Project(c.spec, Options{})
		if err != nil {
			t.Errorf("%s: generate: %v", c.name, err)
			continue
		}
		pol := compose.DefaultPolicy()
		if c.pol != nil {
			c.pol(&pol)
		}
		err = CheckProject(pol, p)
		var pe *compose.PolicyError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want a *compose.PolicyError about %q", c.name, err, c.want)
		}
	}
	// The policy's switches still apply: host networking when allowed, any mount when allowed.
	p, _ = genService(t, Spec{Network: NetworkHost, Mounts: []Mount{{Source: "/etc", Target: "/e"}}}, Options{})
	pol := compose.DefaultPolicy()
	pol.AllowHostNetwork, pol.AllowAnyMount = true, true
	if err := CheckProject(pol, p); err != nil {
		t.Errorf("relaxed policy: %v", err)
	}
}

// The project directory is the smallest one holding every bind source, so that the task-level
// check admits exactly the spec's binds.
func TestContainerProjectDir(t *testing.T) {
	root := mkdirs(t, "ws/sub", "other")
	ws := filepath.Join(root, "ws")
	p, _ := genService(t, Spec{Workspace: ws, Mounts: []Mount{{Source: "sub", Target: "/s"}}}, Options{})
	if p.WorkingDir != compose.ResolvePath(ws) {
		t.Errorf("all in the workspace: project dir %s, want %s", p.WorkingDir, ws)
	}
	p, _ = genService(t, Spec{Workspace: ws, Mounts: []Mount{{Source: filepath.Join(root, "other"), Target: "/o"}}}, Options{})
	if p.WorkingDir != compose.ResolvePath(root) {
		t.Errorf("workspace and a sibling: project dir %s, want %s", p.WorkingDir, root)
	}
}

// A build spec becomes a build service, planned and built once per content hash like any task.
func TestContainerProjectBuild(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile.sandbox"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, svc := genService(t, Spec{Build: &Build{Context: dir, Dockerfile: "Dockerfile.sandbox", Args: map[string]string{"V": "1"}}}, Options{})
	if svc.Build == nil || svc.Build.Context != dir || svc.Build.Dockerfile != "Dockerfile.sandbox" || *svc.Build.Args["V"] != "1" || svc.Image != "" {
		t.Fatalf("build %+v, image %q", svc.Build, svc.Image)
	}
	plan, err := compose.PlanImages(p, "container")
	if err != nil || len(plan.Builds) != 1 || plan.Builds[0].Service != compose.DefaultServiceName {
		t.Errorf("plan %+v, %v", plan, err)
	}
}

// Harnesses keep their runtime config in YAML: a spec decodes from it, mounts as
// strings or mappings.
func TestContainerSpecFromYAML(t *testing.T) {
	src := `
image: python:3.12-slim
workdir: /workspace
memory_mb: 512
cpus: 1.0
network: bridge
mounts:
  - /host/data:/container/data:ro
  - {source: /host/cache, target: /cache}
assets:
  - {source: tests, save_path: tests/fixtures}
host_user: {uid: 1000, gid: 1000}
setup: ["pip install -e ."]
extra_args: ["--cap-drop=ALL"]
`
	var spec Spec
	if err := yaml.Unmarshal([]byte(src), &spec); err != nil {
		t.Fatal(err)
	}
	want := Spec{
		Image: "python:3.12-slim", Workdir: "/workspace", MemoryMB: 512, CPUs: 1, Network: NetworkBridge,
		Mounts: []Mount{{Source: "/host/data", Target: "/container/data", ReadOnly: true}, {Source: "/host/cache", Target: "/cache"}},
		Assets: []Asset{{Source: "tests", SavePath: "tests/fixtures"}}, HostUser: &HostUser{UID: 1000, GID: 1000},
		Setup: []string{"pip install -e ."}, ExtraArgs: []string{"--cap-drop=ALL"},
	}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("decoded %+v\nwant    %+v", spec, want)
	}
}
