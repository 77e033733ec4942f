package compose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// checkYAML loads a one-file project in a fresh task directory (holding extra files) and runs
// policy p over it.
func checkYAML(t *testing.T, p Policy, yml string, files map[string]string) (string, []Violation) {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	writeFiles(t, dir, map[string]string{"compose.yaml": yml})
	proj := mustLoad(t, dir, LoadOptions{})
	err := p.Check(proj)
	if err == nil {
		return dir, nil
	}
	if !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("Check error %v is not ErrPolicyViolation", err)
	}
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("Check error %v is not a *PolicyError", err)
	}
	return dir, pe.Violations
}

func TestPolicyRules(t *testing.T) {
	const head = "services:\n  default:\n    image: busybox\n"
	tests := []struct {
		name   string
		yml    string // appended to head
		policy Policy
		field  string // "" means no violation
		value  string
	}{
		{"privileged", "    privileged: true\n", Policy{}, "privileged", "true"},
		{"privileged allowed", "    privileged: true\n", Policy{AllowPrivileged: true}, "", ""},
		{"network host", "    network_mode: host\n", Policy{}, "network_mode", "host"},
		{"network host allowed", "    network_mode: host\n", Policy{AllowHostNetwork: true}, "", ""},
		{"network none", "    network_mode: none\n", Policy{}, "", ""},
		{"pid host", "    pid: host\n", Policy{}, "pid", "host"},
		{"ipc host", "    ipc: host\n", Policy{}, "ipc", "host"},
		{"uts host", "    uts: host\n", Policy{}, "uts", "host"},
		{"userns host", "    userns_mode: host\n", Policy{}, "userns_mode", "host"},
		{"cgroup host", "    cgroup: host\n", Policy{}, "cgroup", "host"},
		{"namespaces allowed", "    pid: host\n    ipc: host\n", Policy{AllowHostNamespaces: true}, "", ""},
		{"ipc shareable", "    ipc: shareable\n", Policy{}, "", ""},
		{"cap ALL", "    cap_add: [ALL]\n", Policy{}, "cap_add", "ALL"},
		{"cap sys_admin lowercase", "    cap_add: [sys_admin]\n", Policy{}, "cap_add", "sys_admin"},
		{"cap CAP_SYS_ADMIN", "    cap_add: [CAP_SYS_ADMIN]\n", Policy{}, "cap_add", "CAP_SYS_ADMIN"},
		{"cap Cap_Net_Admin", "    cap_add: [Cap_Net_Admin]\n", Policy{}, "cap_add", "Cap_Net_Admin"},
		{"cap sys_module", "    cap_add: [SYS_MODULE]\n", Policy{}, "cap_add", "SYS_MODULE"},
		{"cap harmless", "    cap_add: [CHOWN, NET_BIND_SERVICE, SYS_PTRACE]\n", Policy{}, "", ""},
		{"cap allowed by name", "    cap_add: [CAP_NET_ADMIN]\n", Policy{AllowCapabilities: []string{"net_admin"}}, "", ""},
		{"cap allowed by ALL", "    cap_add: [SYS_ADMIN]\n", Policy{AllowCapabilities: []string{"ALL"}}, "", ""},
		{"cap other not allowed", "    cap_add: [SYS_ADMIN]\n", Policy{AllowCapabilities: []string{"NET_ADMIN"}}, "cap_add", "SYS_ADMIN"},
		{"devices", "    devices: [\"/dev/fuse:/dev/fuse\"]\n", Policy{}, "devices", "/dev/fuse:/dev/fuse:rwm"},
		{"device cgroup rules", "    device_cgroup_rules: [\"c 1:3 mr\"]\n", Policy{}, "device_cgroup_rules", "c 1:3 mr"},
		{"devices allowed", "    devices: [\"/dev/fuse\"]\n", Policy{AllowDevices: true}, "", ""},
		{"seccomp=unconfined", "    security_opt: [\"seccomp=unconfined\"]\n", Policy{}, "security_opt", "seccomp=unconfined"},
		{"seccomp:unconfined", "    security_opt: [\"seccomp:unconfined\"]\n", Policy{}, "security_opt", "seccomp:unconfined"},
		{"apparmor=unconfined", "    security_opt: [\"apparmor=unconfined\"]\n", Policy{}, "security_opt", "apparmor=unconfined"},
		{"apparmor:unconfined", "    security_opt: [\"apparmor:unconfined\"]\n", Policy{}, "security_opt", "apparmor:unconfined"},
		{"label=disable", "    security_opt: [\"label=disable\"]\n", Policy{}, "security_opt", "label=disable"},
		{"label:disable", "    security_opt: [\"label:disable\"]\n", Policy{}, "security_opt", "label:disable"},
		{"systempaths", "    security_opt: [\"systempaths=unconfined\"]\n", Policy{}, "security_opt", "systempaths=unconfined"},
		{"SECCOMP = Unconfined", "    security_opt: [\"SECCOMP = Unconfined\"]\n", Policy{}, "security_opt", "SECCOMP = Unconfined"},
		{"no-new-privileges", "    security_opt: [\"no-new-privileges:true\", \"seccomp=profile.json\", \"label=type:x\"]\n", Policy{}, "", ""},
		{"unconfined allowed", "    security_opt: [\"seccomp=unconfined\"]\n", Policy{AllowUnconfined: true}, "", ""},
		{"docker socket", "    volumes: [\"/var/run/docker.sock:/s\"]\n", Policy{}, "volumes", "/var/run/docker.sock:/s"},
		{"run docker socket", "    volumes: [\"/run/docker.sock:/s\"]\n", Policy{}, "volumes", "/run/docker.sock:/s"},
		{"dir holding the socket", "    volumes: [\"/var/run:/host-run\"]\n", Policy{AllowAnyMount: true}, "volumes", "/var/run:/host-run"},
		{"root dir", "    volumes: [\"/:/host\"]\n", Policy{AllowAnyMount: true}, "volumes", "/:/host"},
		{"long syntax socket", "    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n        target: /s\n", Policy{}, "volumes", "/var/run/docker.sock:/s"},
		{"socket allowed", "    volumes: [\"/var/run/docker.sock:/s\"]\n", Policy{AllowDockerSocket: true, AllowAnyMount: true}, "", ""},
		{"other socket path", "    volumes: [\"/srv/d.sock:/s\"]\n", Policy{DockerSockets: []string{"/srv/d.sock"}, AllowAnyMount: true}, "volumes", "/srv/d.sock:/s"},
		{"use_api_socket", "    use_api_socket: true\n", Policy{}, "use_api_socket", "true"},
		{"bind outside", "    volumes: [\"/etc:/e:ro\"]\n", Policy{}, "volumes", "/etc:/e:ro"},
		{"bind outside via ..", "    volumes: [\"./../../../../../../../../etc:/e\"]\n", Policy{}, "volumes", "/etc:/e"},
		{"bind inside", "    volumes: [\"./data:/data\", \"./missing/deeper:/m\"]\n", Policy{}, "", ""},
		{"bind anywhere allowed", "    volumes: [\"/etc:/e\"]\n", Policy{AllowAnyMount: true}, "", ""},
		{"bind in an extra root", "    volumes: [\"/etc:/e\"]\n", Policy{AllowedMountRoots: []string{"/etc"}}, "", ""},
		{"named volume", "    volumes: [\"data:/data\"]\nvolumes:\n  data: {}\n", Policy{}, "", ""},
		{"volume binding outside", "    volumes: [\"data:/data\"]\nvolumes:\n  data:\n    driver_opts: {type: none, o: bind, device: /etc}\n", Policy{}, "volumes", "data:/data"},
		{"secret file outside", "    secrets: [s]\nsecrets:\n  s:\n    file: /etc/hostname\n", Policy{}, "secrets", "s (file /etc/hostname)"},
		{"secret file inside", "    secrets: [s]\nsecrets:\n  s:\n    file: ./s.txt\n", Policy{}, "", ""},
		{"config file outside", "    configs: [c]\nconfigs:\n  c:\n    file: /etc/hostname\n", Policy{}, "configs", "c (file /etc/hostname)"},
		{"tmpfs", "    tmpfs: [/tmp]\n    volumes:\n      - type: tmpfs\n        target: /run\n", Policy{}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, vs := checkYAML(t, tt.policy, head+tt.yml, map[string]string{"data/": "", "s.txt": "x"})
			if tt.field == "" {
				if len(vs) != 0 {
					t.Fatalf("violations %v, want none", vs)
				}
				return
			}
			if len(vs) != 1 {
				t.Fatalf("violations %v, want one", vs)
			}
			v := vs[0]
			if v.Service != "default" || v.Field != tt.field || !strings.HasPrefix(v.Value, tt.value) {
				t.Errorf("violation = %+v, want service default, field %s, value %s", v, tt.field, tt.value)
			}
			msg := v.String()
			for _, w := range []string{`service "default"`, tt.field, tt.value} {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not name %q", msg, w)
				}
			}
		})
	}
}

func TestPolicyBuild(t *testing.T) {
	yml := `services:
  default:
    build:
      context: .
      privileged: true
      network: host
      entitlements: [security.insecure, network.host]
`
	_, vs := checkYAML(t, Policy{}, yml, map[string]string{"Dockerfile": "FROM scratch\n"})
	var fields []string
	for _, v := range vs {
		fields = append(fields, v.Field+"="+v.Value)
	}
	want := "build.privileged=true build.network=host build.entitlements=security.insecure build.entitlements=network.host"
	if got := strings.Join(fields, " "); got != want {
		t.Errorf("violations %s, want %s", got, want)
	}
}

// Every violation is reported, in one error, not just the first.
func TestPolicyAllViolations(t *testing.T) {
	dir, err := filepath.Abs("../testdata/projects/policy-violations")
	if err != nil {
		t.Fatal(err)
	}
	proj := mustLoad(t, dir, LoadOptions{})
	err = DefaultPolicy().Check(proj)
	var pe *PolicyError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("Check = %v, want a *PolicyError", err)
	}
	want := []string{
		`service "default": privileged: true`,
		`service "default": cap_add: SYS_ADMIN`,
		`service "helper": network_mode: host`,
		`service "helper": volumes: /var/run/docker.sock:/var/run/docker.sock (bind mount of the docker socket`,
	}
	if len(pe.Violations) != len(want) {
		t.Fatalf("violations:\n%v\nwant %d", err, len(want))
	}
	for i, w := range want {
		if got := pe.Violations[i].String(); !strings.HasPrefix(got, w) {
			t.Errorf("violation %d = %q, want %q...", i, got, w)
		}
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if !strings.HasPrefix(err.Error(), "check policy: 4 violations: ") {
		t.Errorf("error = %q", err)
	}
}

// Each file of testdata/projects/policy-violations breaks exactly one rule.
func TestPolicyViolationsTestdata(t *testing.T) {
	dir := "../testdata/projects/policy-violations"
	want := map[string]string{
		"privileged.yaml": "privileged", "network-mode-host.yaml": "network_mode", "pid-host.yaml": "pid",
		"ipc-host.yaml": "ipc", "uts-host.yaml": "uts", "cap-add-all.yaml": "cap_add",
		"cap-add-sys-admin.yaml": "cap_add", "cap-add-net-admin.yaml": "cap_add", "devices.yaml": "devices",
		"docker-socket.yaml": "volumes", "docker-socket-symlink.yaml": "volumes", "bind-outside-root.yaml": "volumes",
		"security-opt-seccomp.yaml": "security_opt", "security-opt-apparmor.yaml": "security_opt",
		"security-opt-label.yaml": "security_opt",
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		if e.Name() == "compose.yaml" || filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		seen++
		t.Run(e.Name(), func(t *testing.T) {
			field, ok := want[e.Name()]
			if !ok {
				t.Fatalf("no expectation for %s", e.Name())
			}
			proj := mustLoad(t, filepath.Join(dir, e.Name()), LoadOptions{})
			err := DefaultPolicy().Check(proj)
			var pe *PolicyError
			if !errors.As(err, &pe) || len(pe.Violations) != 1 || pe.Violations[0].Field != field {
				t.Fatalf("Check = %v, want one violation of %s", err, field)
			}
			if strings.Contains(e.Name(), "docker-socket") && !strings.Contains(err.Error(), "docker socket") {
				t.Errorf("error %q does not say docker socket", err)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("checked %d files, want %d", seen, len(want))
	}
}

func TestPolicySymlinks(t *testing.T) {
	outside := t.TempDir()
	const head = "services:\n  default:\n    image: busybox\n"
	t.Run("link in the task dir to outside", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{"compose.yaml": head + "    volumes: [\"./escape/new/dir:/x\"]\n"})
		err := DefaultPolicy().Check(mustLoad(t, dir, LoadOptions{}))
		if err == nil || !strings.Contains(err.Error(), "which resolves to "+filepath.Join(outside, "new", "dir")) {
			t.Errorf("Check = %v, want the source resolved outside the root", err)
		}
	})
	t.Run("dangling link to the socket", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink("/var/run/nonexistent-dir/../docker.sock", filepath.Join(dir, "sock")); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{"compose.yaml": head + "    volumes: [\"./sock:/s\"]\n"})
		err := DefaultPolicy().Check(mustLoad(t, dir, LoadOptions{}))
		if err == nil || !strings.Contains(err.Error(), "docker socket") {
			t.Errorf("Check = %v, want the docker socket", err)
		}
	})
	t.Run("task dir reached through a link", func(t *testing.T) {
		real := t.TempDir()
		link := filepath.Join(t.TempDir(), "task")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, real, map[string]string{"compose.yaml": head + "    volumes: [\"" + real + "/data:/d\", \"./other:/o\"]\n"})
		if err := DefaultPolicy().Check(mustLoad(t, link, LoadOptions{})); err != nil {
			t.Errorf("Check = %v, want none: both sources are in the task dir", err)
		}
	})
	t.Run("link loop", func(t *testing.T) {
		dir := t.TempDir()
		os.Symlink("b", filepath.Join(dir, "a"))
		os.Symlink("a", filepath.Join(dir, "b"))
		writeFiles(t, dir, map[string]string{"compose.yaml": head + "    volumes: [\"./a:/a\"]\n"})
		_ = DefaultPolicy().Check(mustLoad(t, dir, LoadOptions{})) // must return
	})
}

func TestResolvePath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	writeFiles(t, dir, map[string]string{"real/sub/": ""})
	os.Symlink(real, filepath.Join(dir, "abs"))
	os.Symlink("real/sub", filepath.Join(dir, "rel"))
	os.Symlink("/nonexistent/target", filepath.Join(dir, "dangling"))
	resolvedDir := resolvePath(dir)
	for in, want := range map[string]string{
		dir + "/abs/sub":         filepath.Join(resolvedDir, "real", "sub"),
		dir + "/rel/x/y":         filepath.Join(resolvedDir, "real", "sub", "x", "y"),
		dir + "/dangling/z":      "/nonexistent/target/z",
		dir + "/missing/../real": filepath.Join(resolvedDir, "real"),
		"/":                      "/",
	} {
		if got := resolvePath(in); got != want {
			t.Errorf("resolvePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDefaultPolicyDockerHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
	p := DefaultPolicy()
	if !strings.Contains(strings.Join(p.DockerSockets, " "), "/run/user/1000/docker.sock") {
		t.Errorf("DockerSockets = %v, want DOCKER_HOST's socket", p.DockerSockets)
	}
	proj := project(svc("default"))
	s := proj.Services["default"]
	s.Volumes = []types.ServiceVolumeConfig{{Type: types.VolumeTypeBind, Source: "/run/user/1000/docker.sock", Target: "/s"}}
	proj.Services["default"] = s
	p.AllowAnyMount = true
	if err := p.Check(proj); err == nil {
		t.Error("Check passed a bind of DOCKER_HOST's socket")
	}
}

func TestApplyDefaults(t *testing.T) {
	const yml = `services:
  default:
    image: busybox
  web:
    image: busybox
    deploy:
      resources:
        limits:
          memory: 64m
          cpus: "0.25"
          pids: 10
  bridged:
    image: busybox
    network_mode: bridge
networks:
  back: {}
`
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": yml})
	t.Run("no-op", func(t *testing.T) {
		p := mustLoad(t, dir, LoadOptions{})
		before, _ := p.MarshalYAML()
		DefaultPolicy().ApplyDefaults(p)
		if after, _ := p.MarshalYAML(); string(after) != string(before) {
			t.Errorf("ApplyDefaults without defaults changed the project:\n%s", after)
		}
	})
	t.Run("limits and egress", func(t *testing.T) {
		p := mustLoad(t, dir, LoadOptions{})
		Policy{Memory: 256 << 20, CPUs: 1.5, Pids: 100, EgressOff: true}.ApplyDefaults(p)
		def, web := p.Services["default"], p.Services["web"]
		if def.MemLimit != 256<<20 || def.CPUS != 1.5 || def.PidsLimit != 100 {
			t.Errorf("default: mem %d cpus %v pids %d", def.MemLimit, def.CPUS, def.PidsLimit)
		}
		if web.MemLimit != 0 || web.CPUS != 0 || web.PidsLimit != 0 {
			t.Errorf("web kept its own limits? mem %d cpus %v pids %d", web.MemLimit, web.CPUS, web.PidsLimit)
		}
		if n := p.Networks["default"]; !n.Internal {
			t.Errorf("default network internal = false, want egress cut")
		}
		if _, ok := p.Networks["back"]; ok {
			t.Error("unused network back kept")
		}
		if p.Services["bridged"].NetworkMode != "none" {
			t.Errorf("bridged network_mode = %q, want none", p.Services["bridged"].NetworkMode)
		}
		if _, ok := def.Networks["default"]; !ok {
			t.Error("default lost its network: services could no longer reach each other")
		}
	})
	t.Run("egress single service", func(t *testing.T) {
		d := t.TempDir()
		writeFiles(t, d, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n"})
		p := mustLoad(t, d, LoadOptions{})
		Policy{EgressOff: true}.ApplyDefaults(p)
		if s := p.Services["default"]; s.NetworkMode != "none" || len(s.Networks) != 0 || len(p.Networks) != 0 {
			t.Errorf("network_mode %q networks %v project networks %v", s.NetworkMode, s.Networks, p.Networks)
		}
	})
}
