package compose

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// violations loads path (a directory or a compose file) with policy p and returns the problems
// Load found; nil when it loaded. Any error that is not a *PolicyError fails the test.
func violations(t *testing.T, path string, p Policy, opts LoadOptions) []Violation {
	t.Helper()
	opts.Policy = &p
	_, err := loadDir(t, path, opts)
	return problemsOf(t, err)
}

func problemsOf(t *testing.T, err error) []Violation {
	t.Helper()
	if err == nil {
		return nil
	}
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *PolicyError", err)
	}
	return pe.Violations
}

// yamlViolations loads yml as the compose.yaml of a fresh task directory holding files.
func yamlViolations(t *testing.T, p Policy, yml string, files map[string]string) (string, []Violation) {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	writeFiles(t, dir, map[string]string{"compose.yaml": yml})
	return dir, violations(t, dir, p, LoadOptions{})
}

type ruleOptIn struct{ rule, optIn string }

func (r ruleOptIn) String() string { return r.rule + " [" + r.optIn + "]" }

func rulesOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, ruleOptIn{v.Rule, v.OptIn}.String())
	}
	slices.Sort(out)
	return out
}

const (
	anyMount  = "--allow-mount-root DIR or --allow any-mount"
	policyDir = "../testdata/projects/policy-violations"
)

// Each fixture of testdata/projects/policy-violations breaks one rule (the first four below
// several): it is refused with every rule and opt-in named, and it loads once those opt-ins are
// given.
func TestPolicyViolationsTestdata(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-runner-environment")
	type fixture struct {
		want  []ruleOptIn
		allow func(*Policy) // nil: nothing allows it
		opts  LoadOptions   // with the opt-ins
	}
	one := func(rule, optIn string) []ruleOptIn { return []ruleOptIn{{rule, optIn}} }
	kind := func(k string) []ruleOptIn { return one(k, "--allow "+k) }
	allow := func(kinds ...string) func(*Policy) {
		return func(p *Policy) {
			for _, k := range kinds {
				if err := p.Allow(k); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	caps := func(names ...string) func(*Policy) { return func(p *Policy) { p.AllowCapabilities = names } }
	fixtures := map[string]fixture{
		// A provider, a disk through driver_opts, another container's namespaces, the tree above the task.
		"provider.yaml":           {want: kind("providers"), allow: allow("providers")},
		"volume-driver-opts.yaml": {want: kind("volume-driver-opts"), allow: allow("volume-driver-opts")},
		"other-containers.yaml": {
			want: []ruleOptIn{{"other-containers", "--allow other-containers"}, {"other-containers", "--allow other-containers"},
				{"capabilities", "--allow-cap SYS_PTRACE"}, {"capabilities", "--allow-cap SYS_TIME"}},
			allow: func(p *Policy) { allow("other-containers")(p); caps("SYS_PTRACE", "cap_sys_time")(p) },
		},
		"whole-tree/sandbox/env": {
			want:  []ruleOptIn{{"host-path", anyMount}, {"host-path", anyMount}},
			allow: allow("any-mount"), opts: LoadOptions{PassEnv: []string{"OPENAI_API_KEY"}},
		},
		// A custom seccomp profile, a privileged hook, an image volume.
		"seccomp-profile.yaml":       {want: kind("unconfined"), allow: allow("unconfined")},
		"post-start-privileged.yaml": {want: kind("privileged"), allow: allow("privileged")},
		"image-volume.yaml":          {want: kind("image-volumes"), allow: allow("image-volumes")},
		// One per rule.
		"privileged.yaml":             {want: kind("privileged"), allow: allow("privileged")},
		"network-mode-host.yaml":      {want: kind("host-network"), allow: allow("host-network")},
		"pid-host.yaml":               {want: kind("host-namespaces"), allow: allow("host-namespaces")},
		"ipc-host.yaml":               {want: kind("host-namespaces"), allow: allow("host-namespaces")},
		"uts-host.yaml":               {want: kind("host-namespaces"), allow: allow("host-namespaces")},
		"userns-host.yaml":            {want: kind("host-namespaces"), allow: allow("host-namespaces")},
		"cgroup-host.yaml":            {want: kind("host-namespaces"), allow: allow("host-namespaces")},
		"propagation.yaml":            {want: kind("host-namespaces"), allow: allow("host-namespaces")},
		"network-mode-container.yaml": {want: kind("other-containers"), allow: allow("other-containers")},
		"external-links.yaml":         {want: kind("other-containers"), allow: allow("other-containers")},
		"external-volume.yaml":        {want: kind("other-containers"), allow: allow("other-containers")},
		"cap-add-all.yaml":            {want: one("capabilities", "--allow-cap ALL"), allow: caps("ALL")},
		"cap-add-net-admin.yaml":      {want: one("capabilities", "--allow-cap NET_ADMIN"), allow: caps("net_admin")},
		"cap-add-sys-admin.yaml":      {want: one("capabilities", "--allow-cap SYS_ADMIN"), allow: caps("CAP_SYS_ADMIN")},
		"devices.yaml":                {want: kind("devices"), allow: allow("devices")},
		"device-cgroup-rules.yaml":    {want: kind("devices"), allow: allow("devices")},
		"gpus.yaml":                   {want: kind("devices"), allow: allow("devices")},
		"docker-socket.yaml":          {want: kind("docker-socket"), allow: allow("docker-socket")},
		"docker-socket-symlink.yaml":  {want: kind("docker-socket"), allow: allow("docker-socket")},
		"use-api-socket.yaml":         {want: kind("docker-socket"), allow: allow("docker-socket")},
		"security-opt-seccomp.yaml":   {want: kind("unconfined"), allow: allow("unconfined")},
		"security-opt-apparmor.yaml":  {want: kind("unconfined"), allow: allow("unconfined")},
		"security-opt-label.yaml":     {want: kind("unconfined"), allow: allow("unconfined")},
		"runtime.yaml":                {want: kind("runtime"), allow: allow("runtime")},
		"sysctls.yaml":                {want: kind("sysctls"), allow: allow("sysctls")},
		"network-driver.yaml":         {want: kind("network-drivers"), allow: allow("network-drivers")},
		"network-driver-opts.yaml":    {want: kind("network-drivers"), allow: allow("network-drivers")},
		"external-network-host.yaml":  {want: kind("host-network"), allow: allow("host-network")},
		"logging.yaml":                {want: kind("logging"), allow: allow("logging")},
		"oom-score-adj.yaml":          {want: kind("host-priority"), allow: allow("host-priority")},
		"cpu-rt-runtime.yaml":         {want: kind("host-priority"), allow: allow("host-priority")},
		"cgroup-parent.yaml":          {want: kind("cgroup-parent"), allow: allow("cgroup-parent")},
		"build-privileged.yaml":       {want: kind("privileged"), allow: allow("privileged")},
		"build-network-host.yaml":     {want: kind("host-network"), allow: allow("host-network")},
		"models.yaml":                 {want: []ruleOptIn{{"providers", "--allow providers"}, {"providers", "--allow providers"}}, allow: allow("providers")},
		"build-ssh.yaml":              {want: one("denied", "")},
		"build-remote-context.yaml":   {want: one("build-context", "")},
		"credential-spec.yaml":        {want: one("denied", "")},
		"bind-outside-root.yaml":      {want: one("host-path", anyMount), allow: allow("any-mount")},
		"env-file/task":               {want: one("host-path", anyMount), allow: allow("any-mount")},
		"label-file/task":             {want: one("host-path", anyMount), allow: allow("any-mount")},
		"extends/task":                {want: one("host-path", anyMount), allow: allow("any-mount")},
		"include/task":                {want: one("host-path", anyMount), allow: allow("any-mount")},
		"secret-file/task":            {want: one("host-path", anyMount), allow: allow("any-mount")},
		"config-file/task":            {want: one("host-path", anyMount), allow: allow("any-mount")},
		"dockerfile/task":             {want: one("host-path", anyMount), allow: allow("any-mount")},
		"develop/task":                {want: one("host-path", anyMount), allow: allow("any-mount")},
		"seccomp-file/task": {want: []ruleOptIn{{"unconfined", "--allow unconfined"}, {"host-path", anyMount}},
			allow: allow("unconfined", "any-mount")},
		"volume-bind/task": {want: []ruleOptIn{{"volume-driver-opts", "--allow volume-driver-opts"}, {"host-path", anyMount}},
			allow: allow("volume-driver-opts", "any-mount")},
		"compose.yaml": {
			want: []ruleOptIn{{"privileged", "--allow privileged"}, {"capabilities", "--allow-cap SYS_ADMIN"},
				{"host-network", "--allow host-network"}, {"docker-socket", "--allow docker-socket"}},
			allow: func(p *Policy) { allow("privileged", "host-network", "docker-socket")(p); caps("SYS_ADMIN")(p) },
		},
	}
	// Every fixture has an expectation.
	entries, err := os.ReadDir(policyDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		_, isFile := fixtures[e.Name()]
		isDir := false
		for k := range fixtures {
			isDir = isDir || strings.HasPrefix(k, e.Name()+"/")
		}
		if !isFile && !isDir && filepath.Ext(e.Name()) == ".yaml" || e.IsDir() && !isDir {
			t.Errorf("policy-violations/%s has no expectation", e.Name())
		}
	}
	for name, f := range fixtures {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(policyDir, name)
			vs := violations(t, path, DefaultPolicy(), LoadOptions{})
			want := make([]string, len(f.want))
			for i, w := range f.want {
				want[i] = w.String()
			}
			slices.Sort(want)
			if got := rulesOf(vs); !slices.Equal(got, want) {
				t.Fatalf("violations %q, want %q:\n%v", got, want, &PolicyError{Violations: vs})
			}
			for _, v := range vs {
				msg := v.String()
				for _, w := range []string{v.Field, v.OptIn} {
					if !strings.Contains(msg, w) {
						t.Errorf("message %q does not name %q", msg, w)
					}
				}
				if v.Field == "" {
					t.Errorf("violation %+v does not say where it is", v)
				}
			}
			if f.allow == nil {
				for _, v := range vs {
					if v.OptIn != "" && !v.Invalid {
						t.Errorf("violation %+v names an opt-in, want none", v)
					}
				}
				return
			}
			p := DefaultPolicy()
			f.allow(&p)
			if vs := violations(t, path, p, f.opts); len(vs) != 0 {
				t.Errorf("with the opt-ins: %v", &PolicyError{Violations: vs})
			}
		})
	}
}

// The runner's OPENAI_API_KEY is in composebox's environment, and the file does not get it: it
// is blank, as an unset variable is, and the warning names the flags that would pass it.
func TestPolicyRunnerSecretsNotInterpolated(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret-of-the-runner")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    environment: {K: \"${OPENAI_API_KEY}\", L: \"$OPENAI_API_KEY\"}\n    labels: [\"k=${OPENAI_API_KEY:-none}\"]\n"})
	var logged bytes.Buffer
	p := mustLoad(t, dir, LoadOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if k, l, lbl := env(p.Services["default"], "K"), env(p.Services["default"], "L"), p.Services["default"].Labels["k"]; k != "" || l != "" || lbl != "none" {
		t.Errorf("K = %q, L = %q, label k = %q; want both blank and the label's default", k, l, lbl)
	}
	for _, w := range []string{"variable=OPENAI_API_KEY", "compose.yaml line=4", "--pass-env OPENAI_API_KEY", "--var OPENAI_API_KEY=VALUE", "--env-file FILE"} {
		if !strings.Contains(logged.String(), w) {
			t.Errorf("warning %q does not contain %q", logged.String(), w)
		}
	}
	if b, _ := p.MarshalJSON(); strings.Contains(logged.String()+string(b), "sk-secret") {
		t.Errorf("the runner's value reached the project or the log:\n%s", logged.String())
	}
	// Passed one by one, it is interpolated.
	p = mustLoad(t, dir, LoadOptions{PassEnv: []string{"OPENAI_API_KEY"}})
	if got := env(p.Services["default"], "K"); got != "sk-secret-of-the-runner" {
		t.Errorf("K = %q with --pass-env", got)
	}
	// The runner's value does not replace a default.
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    environment: {K: \"${OPENAI_API_KEY:-none}\"}\n"})
	if got := env(mustLoad(t, dir, LoadOptions{}).Services["default"], "K"); got != "none" {
		t.Errorf("K = %q, want the file's default", got)
	}
}

func TestPolicyRules(t *testing.T) {
	const head = "services:\n  default:\n    image: busybox\n"
	tests := []struct {
		name   string
		yml    string // appended to head
		policy Policy
		want   string // "" means no violation, else "rule [opt-in]"
		field  string
	}{
		{"cap default set", "    cap_add: [CHOWN, NET_BIND_SERVICE, cap_kill, AUDIT_WRITE]\n", Policy{}, "", ""},
		{"cap outside the default set", "    cap_add: [SYS_PTRACE]\n", Policy{}, "capabilities [--allow-cap SYS_PTRACE]", "cap_add[0]"},
		{"cap Cap_Net_Admin", "    cap_add: [Cap_Net_Admin]\n", Policy{}, "capabilities [--allow-cap NET_ADMIN]", "cap_add[0]"},
		{"cap other not allowed", "    cap_add: [SYS_ADMIN]\n", Policy{AllowCapabilities: []string{"NET_ADMIN"}}, "capabilities [--allow-cap SYS_ADMIN]", "cap_add[0]"},
		{"cap_drop", "    cap_drop: [ALL]\n", Policy{}, "", ""},
		{"network none", "    network_mode: none\n", Policy{}, "", ""},
		{"network bridge (the sample's own)", "    network_mode: bridge\n", Policy{}, "", ""},
		{"network default (the sample's own)", "    network_mode: default\n", Policy{}, "", ""},
		{"the engine's bridge", "    network_mode: bridge\n    x-composebox-engine-bridge: true\n", Policy{}, "host-access [--allow host-access]", "network_mode"},
		{"the engine's bridge with host-access", "    network_mode: bridge\n    x-composebox-engine-bridge: true\n", Policy{AllowHostAccess: true}, "", ""},
		{"the engine's bridge without network_mode", "    x-composebox-engine-bridge: \"true\"\n", Policy{AllowHostAccess: true}, "namespaces [network_mode: bridge]", "x-composebox-engine-bridge"},
		{"network of a service", "    network_mode: service:web\n  web:\n    image: busybox\n", Policy{}, "", ""},
		{"network of a named network", "    network_mode: someones_net\n", Policy{}, "other-containers [--allow other-containers]", "network_mode"},
		{"pid of a service", "    pid: service:web\n  web:\n    image: busybox\n", Policy{}, "", ""},
		{"ipc shareable", "    ipc: shareable\n", Policy{}, "", ""},
		{"ipc of a container", "    ipc: container:db\n", Policy{}, "other-containers [--allow other-containers]", "ipc"},
		{"volumes_from a service", "    volumes_from: [web, \"web:ro\"]\n  web:\n    image: busybox\n", Policy{}, "", ""},
		{"volumes_from a container", "    volumes_from: [\"container:db:ro\"]\n", Policy{}, "other-containers [--allow other-containers]", "volumes_from[0]"},
		{"no-new-privileges", "    security_opt: [\"no-new-privileges:true\", no-new-privileges, \"seccomp=builtin\", \"apparmor=docker-default\"]\n", Policy{}, "", ""},
		{"apparmor profile", "    security_opt: [\"apparmor=my-profile\"]\n", Policy{}, "unconfined [--allow unconfined]", "security_opt[0]"},
		{"SELinux type", "    security_opt: [\"label=type:spc_t\"]\n", Policy{}, "unconfined [--allow unconfined]", "security_opt[0]"},
		{"systempaths", "    security_opt: [\"systempaths=unconfined\"]\n", Policy{}, "unconfined [--allow unconfined]", "security_opt[0]"},
		{"namespaced sysctls", "    sysctls: {net.ipv4.ip_forward: 1, net/core/somaxconn: 1024, kernel.shmmax: 1, fs.mqueue.msg_max: 10}\n", Policy{}, "", ""},
		{"net sysctl on the host network", "    network_mode: host\n    sysctls: {net.ipv4.ip_forward: 1}\n", Policy{AllowHostNetwork: true}, "sysctls [--allow sysctls]", "sysctls.net.ipv4.ip_forward"},
		{"ipc sysctl on the host ipc", "    ipc: host\n    sysctls: {kernel.shmmax: 1}\n", Policy{AllowHostNamespaces: true}, "sysctls [--allow sysctls]", "sysctls.kernel.shmmax"},
		{"runc", "    runtime: runc\n", Policy{}, "", ""},
		{"json-file logging", "    logging: {driver: json-file, options: {max-size: 1m}}\n", Policy{}, "", ""},
		{"positive oom score", "    oom_score_adj: 500\n", Policy{}, "", ""},
		{"tmpfs volume", "    volumes: [\"t:/t\"]\nvolumes:\n  t:\n    driver_opts: {type: tmpfs, device: tmpfs, o: \"size=64m,uid=1000,mode=0700\"}\n", Policy{}, "", ""},
		{"tmpfs with exec", "    volumes: [\"t:/t\"]\nvolumes:\n  t:\n    driver_opts: {type: tmpfs, device: tmpfs, o: \"size=64m,dev\"}\n", Policy{}, "volume-driver-opts [--allow volume-driver-opts]", "volumes.t.driver_opts"},
		{"volume plugin", "    volumes: [\"t:/t\"]\nvolumes:\n  t:\n    driver: rexray\n", Policy{}, "volume-driver-opts [--allow volume-driver-opts]", "volumes.t.driver"},
		{"named volume", "    volumes: [\"data:/data\"]\nvolumes:\n  data: {}\n", Policy{}, "", ""},
		{"bind inside", "    volumes: [\"./data:/data\", \"./missing/deeper:/m\"]\n", Policy{}, "", ""},
		{"bind of /dev/null", "    volumes: [\"/dev/null:/etc/motd:ro\"]\n", Policy{}, "", ""},
		{"bind of /dev/zero", "    volumes: [\"/dev/zero:/z\"]\n", Policy{}, "host-path [" + anyMount + "]", "volumes[0].source"},
		{"bind outside via ..", "    volumes: [\"./../../../../../../../../etc:/e\"]\n", Policy{}, "host-path [" + anyMount + "]", "volumes[0].source"},
		{"bind in an extra root", "    volumes: [\"/etc:/e\"]\n", Policy{AllowedMountRoots: []string{"/etc"}}, "", ""},
		{"bind of ~", "    volumes: [\"~/.ssh:/keys\"]\n", Policy{}, "host-path [" + anyMount + "]", "volumes[0].source"},
		{"dir holding the socket", "    volumes: [\"/var/run:/host-run\"]\n", Policy{AllowAnyMount: true}, "docker-socket [--allow docker-socket]", "volumes[0].source"},
		{"dir holding the socket, socket allowed", "    volumes: [\"/var/run:/host-run\"]\n", Policy{AllowDockerSocket: true}, "host-path [" + anyMount + "]", "volumes[0].source"},
		{"root dir", "    volumes: [\"/:/host\"]\n", Policy{AllowAnyMount: true}, "docker-socket [--allow docker-socket]", "volumes[0].source"},
		{"other socket path", "    volumes: [\"/srv/d.sock:/s\"]\n", Policy{DockerSockets: []string{"/srv/d.sock"}, AllowAnyMount: true}, "docker-socket [--allow docker-socket]", "volumes[0].source"},
		{"secret file inside", "    secrets: [s]\nsecrets:\n  s:\n    file: ./s.txt\n", Policy{}, "", ""},
		{"secret file outside", "    secrets: [s]\nsecrets:\n  s:\n    file: /etc/hostname\n", Policy{}, "host-path [" + anyMount + "]", "secrets.s.file"},
		{"secret from a variable given", "    secrets: [s]\nsecrets:\n  s:\n    environment: GIVEN\n", Policy{}, "", ""},
		{"secret from an unset variable", "    secrets: [s]\nsecrets:\n  s:\n    environment: MISSING\n", Policy{}, "variables [" + variableFix("MISSING") + "]", "secrets.s.environment"},
		{"config from an unset variable", "    configs: [c]\nconfigs:\n  c:\n    environment: MISSING\n", Policy{}, "variables [" + variableFix("MISSING") + "]", "configs.c.environment"},
		{"env file inside", "    env_file: [vars.env]\n", Policy{}, "", ""},
		{"label file inside", "    label_file: [labels]\n", Policy{}, "", ""},
		{"tmpfs", "    tmpfs: [/tmp]\n    volumes:\n      - type: tmpfs\n        target: /run\n", Policy{}, "", ""},
		{"container_name", "    container_name: fixed\n", Policy{}, "", ""},
		{"external network", "    networks: [ctf]\nnetworks:\n  ctf: {external: true}\n", Policy{}, "", ""},
		{"fixed published port", "    ports: [\"8080:80\"]\n", Policy{}, "", ""},
		{"port on loopback", "    ports: [\"127.0.0.1:8080:80\", \"[::1]::81\", \"127.0.0.2::82\", \"83\"]\n", Policy{}, "", ""},
		{"port on every address", "    ports: [\"0.0.0.0:8080:80\"]\n", Policy{}, "public-ports [--allow public-ports]", "ports[0].host_ip"},
		{"port on every IPv6 address", "    ports: [{target: 80, host_ip: \"::\"}]\n", Policy{}, "public-ports [--allow public-ports]", "ports[0].host_ip"},
		{"port on an interface", "    ports: [\"192.0.2.2::80\"]\n", Policy{}, "public-ports [--allow public-ports]", "ports[0].host_ip"},
		{"port on every address, opted in", "    ports: [\"0.0.0.0:8080:80\"]\n", Policy{AllowPublicPorts: true}, "", ""},
		{"hooks", "    post_start: [{command: [\"true\"], user: root}]\n    pre_stop: [{command: [\"true\"]}]\n", Policy{}, "", ""},
		{"pre_stop privileged", "    pre_stop: [{command: [\"true\"], privileged: true}]\n", Policy{}, "privileged [--allow privileged]", "pre_stop[0].privileged"},
		{"develop exec privileged", "    develop:\n      watch: [{path: ./data, action: sync+exec, target: /d, exec: {command: [\"true\"], privileged: true}}]\n", Policy{}, "privileged [--allow privileged]", "develop.watch[0].exec.privileged"},
		{"deploy devices", "    deploy: {resources: {reservations: {devices: [{capabilities: [gpu]}]}}}\n", Policy{}, "devices [--allow devices]", "deploy.resources.reservations.devices"},
		{"deploy limits", "    deploy: {resources: {limits: {cpus: \"1\", memory: 64m, pids: 10}}, restart_policy: {condition: on-failure}}\n", Policy{}, "", ""},
		{"annotations", "    annotations: {run.oci.keep_original_groups: \"1\"}\n", Policy{}, "runtime [--allow runtime]", "annotations"},
		{"oom_kill_disable", "    oom_kill_disable: true\n", Policy{}, "host-priority [--allow host-priority]", "oom_kill_disable"},
		{"ulimit rtprio", "    ulimits: {rtprio: 99}\n", Policy{}, "host-priority [--allow host-priority]", "ulimits.rtprio"},
		{"ulimit nice", "    ulimits: {nice: {soft: 40, hard: 40}}\n", Policy{}, "host-priority [--allow host-priority]", "ulimits.nice"},
		{"ulimit nice allowed", "    ulimits: {nice: 40}\n", Policy{AllowHostPriority: true}, "", ""},
		{"build ulimit rtprio", "    build: {context: ., dockerfile_inline: \"FROM scratch\", ulimits: {rtprio: 99}}\n", Policy{}, "host-priority [--allow host-priority]", "build.ulimits.rtprio"},
		{"ulimits of its own", "    ulimits: {nofile: {soft: 1024, hard: 2048}, nproc: 512}\n", Policy{}, "", ""},
		{"our owner label", "    labels: {dev.composebox.owner: detached}\n", Policy{}, "labels []", "labels.dev.composebox.owner"},
		{"our pool label on a volume", "    volumes: [\"d:/d\"]\nvolumes:\n  d:\n    labels: {dev.composebox.pool: warm}\n", Policy{}, "labels []", "volumes.d.labels.dev.composebox.pool"},
		{"compose's project label", "    labels: [\"com.docker.compose.project=other\"]\n", Policy{AllowHostPriority: true}, "labels []", "labels.com.docker.compose.project"},
		{"build label of ours", "    build: {context: ., dockerfile_inline: \"FROM scratch\", labels: {dev.composebox.image: base}}\n", Policy{}, "labels []", "build.labels.dev.composebox.image"},
		{"labels of its own", "    labels: {org.example.team: evals}\n", Policy{}, "", ""},
		{"build on a named network", "    build: {context: ., dockerfile_inline: \"FROM scratch\", network: other_net}\n", Policy{}, "other-containers [--allow other-containers]", "build.network"},
		{"build entitlement", "    build: {context: ., dockerfile_inline: \"FROM scratch\", entitlements: [security.insecure]}\n", Policy{}, "privileged [--allow privileged]", "build.entitlements[0]"},
		{"build inside", "    build: {context: ./ctx, dockerfile: ../ctx.Dockerfile}\n", Policy{}, "", ""},
	}
	files := map[string]string{"data/": "", "s.txt": "x", "vars.env": "A=1\n", "labels": "a=1\n", "ctx/": "", "ctx.Dockerfile": "FROM scratch\n"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			dir := t.TempDir()
			writeFiles(t, dir, files)
			writeFiles(t, dir, map[string]string{"compose.yaml": head + tt.yml})
			vs := violations(t, dir, p, LoadOptions{Environment: map[string]string{"GIVEN": "x"}})
			if tt.want == "" {
				if len(vs) != 0 {
					t.Fatalf("violations %v, want none", &PolicyError{Violations: vs})
				}
				return
			}
			if len(vs) != 1 || rulesOf(vs)[0] != tt.want || vs[0].Field != tt.field {
				t.Fatalf("violations %v (%q), want one %s at %s", &PolicyError{Violations: vs}, rulesOf(vs), tt.want, tt.field)
			}
			if strings.HasPrefix(tt.field, "secrets.") || strings.HasPrefix(tt.field, "configs.") || strings.HasPrefix(tt.field, "volumes.") {
				if vs[0].Service != "" {
					t.Errorf("service %q for a project-level field", vs[0].Service)
				}
			} else if vs[0].Service != "default" {
				t.Errorf("service %q, want default", vs[0].Service)
			}
		})
	}
}

// Every problem comes back at once: policy violations of several services, a container_name
// used twice, a missing build context and the default service, in one error.
func TestPolicyEveryProblemAtOnce(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": `services:
  a:
    image: busybox
    privileged: true
    container_name: one
  b:
    build: ./missing
    cap_add: [SYS_ADMIN]
    volumes: ["/etc:/etc"]
    container_name: one
`})
	_, err := loadDir(t, dir, LoadOptions{})
	if !errors.Is(err, ErrPolicyViolation) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want both categories", err)
	}
	got := rulesOf(problemsOf(t, err))
	want := []string{"build []", "capabilities [--allow-cap SYS_ADMIN]", "container-name []", "default-service [--default SERVICE, or --agent-image IMAGE]",
		"host-path [" + anyMount + "]", "privileged [--allow privileged]"}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q\nwant %q", got, want)
	}
	if !strings.HasPrefix(err.Error(), "check "+filepath.Join(dir, "compose.yaml")+": 6 problems:\n  - ") {
		t.Errorf("error = %q", err)
	}
	// Prepare adds what normalisation finds; a container_name and a fixed name are adapted per
	// sample, not refused.
	r, _ := Resolve(dir, ResolveOptions{})
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    privileged: true\n    container_name: fixed\nnetworks:\n  n: {name: fixed-net}\n"})
	_, err = Prepare(t.Context(), r, LoadOptions{}, NormalizeOptions{})
	if got := rulesOf(problemsOf(t, err)); !slices.Equal(got, []string{"privileged [--allow privileged]"}) {
		t.Errorf("Prepare: %v", err)
	}
	_, err = Prepare(t.Context(), r, LoadOptions{}, NormalizeOptions{Name: "Not Valid"})
	if got := rulesOf(problemsOf(t, err)); !slices.Contains(got, "normalize []") {
		t.Errorf("Prepare with a bad name: %v", err)
	}
}

func TestPolicyBuildEntitlements(t *testing.T) {
	yml := `services:
  default:
    build:
      context: .
      network: host
      entitlements: [security.insecure, network.host]
`
	_, vs := yamlViolations(t, Policy{}, yml, map[string]string{"Dockerfile": "FROM scratch\n"})
	var fields []string
	for _, v := range vs {
		fields = append(fields, v.Field+"="+v.Value+":"+v.Rule)
	}
	want := "build.entitlements[0]=security.insecure:privileged build.entitlements[1]=network.host:host-network build.network=host:host-network"
	if got := strings.Join(fields, " "); got != want {
		t.Errorf("violations %s, want %s", got, want)
	}
}

// TestPolicyTableCoversComposeTypes walks compose-go's types by reflection: every field a compose
// file can set must be in the policy table, so that a compose-go upgrade adding one (as
// `provider` and `models` were added) fails here rather than reaching the host unchecked. A table
// entry that matches no field is stale and fails too.
func TestPolicyTableCoversComposeTypes(t *testing.T) {
	seen := map[string]bool{}
	var walkType func(typ reflect.Type, key string)
	walkType = func(typ reflect.Type, key string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			fkey := join(key, name)
			seen[fkey] = true
			e, ok := policyTable[fkey]
			if !ok {
				t.Errorf("%s (%s.%s, %s) is not in the policy table", fkey, typ.Name(), f.Name, f.Type)
				continue
			}
			elem, suffix, isStruct := elemStruct(f.Type)
			switch {
			case e.class == classWalk && !isStruct:
				t.Errorf("%s is walked but holds no structure (%s)", fkey, f.Type)
			case e.class == classWalk:
				walkType(elem, fkey+suffix)
			case e.class == classRule && policyRules[e.rule] == nil:
				t.Errorf("%s names the unknown rule %q", fkey, e.rule)
			case e.class == classRule && e.walk && !isStruct:
				t.Errorf("%s is walked after its rule but holds no structure (%s)", fkey, f.Type)
			case e.class == classRule && e.walk:
				walkType(elem, fkey+suffix)
			case e.class == classDeny && e.kind != "" && AllowKindHelp(e.kind) == "":
				t.Errorf("%s names the unknown opt-in %q", fkey, e.kind)
			}
		}
	}
	walkType(reflect.TypeFor[types.Project](), "")
	walkType(reflect.TypeFor[types.IncludeConfig](), "include[]")
	for key := range policyTable {
		if !seen[key] {
			t.Errorf("policy table entry %s matches no field of compose-go's types", key)
		}
	}
	if len(seen) < 300 {
		t.Errorf("walked %d fields: the walk is broken", len(seen))
	}
}

// A field the table does not know is denied with its path.
func TestPolicyUnknownFieldDenied(t *testing.T) {
	saved := policyTable["services.*.stop_signal"]
	delete(policyTable, "services.*.stop_signal")
	defer func() { policyTable["services.*.stop_signal"] = saved }()
	proj := project(svc("default"))
	s := proj.Services["default"]
	s.StopSignal = "SIGKILL"
	proj.Services["default"] = s
	err := DefaultPolicy().Check(proj)
	vs := problemsOf(t, err)
	if len(vs) != 1 || vs[0].Rule != "unknown-field" || vs[0].Field != "stop_signal" || vs[0].Service != "default" || !errors.Is(err, ErrPolicyViolation) {
		t.Errorf("Check = %v, want stop_signal denied as unknown", err)
	}
}

func TestPolicyKinds(t *testing.T) {
	var p Policy
	for _, k := range AllowKinds() {
		if err := p.Allow(k); err != nil {
			t.Fatal(err)
		}
		if AllowKindHelp(k) == "" {
			t.Errorf("%s has no help", k)
		}
	}
	if got := p.Allowed(); !slices.Equal(got, AllowKinds()) {
		t.Errorf("Allowed = %v", got)
	}
	// Every switch of the struct is some kind's.
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.Bool && v.Type().Field(i).Name != "EgressOff" && !v.Field(i).Bool() {
			t.Errorf("%s has no opt-in kind", v.Type().Field(i).Name)
		}
	}
	if err := p.Allow("everything"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "privileged, host-network") {
		t.Errorf("Allow(everything) = %v", err)
	}
}

// pull_policy asks compose to pull: composebox never does, so it is rewritten to never.
func TestPolicyPullPolicyForcedOff(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    pull_policy: always\n  b:\n    image: busybox\n    pull_policy: daily\n  c:\n    image: busybox\n"})
	p := mustLoad(t, dir, LoadOptions{})
	for name, s := range p.Services {
		if s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: pull_policy %q, want never", name, s.PullPolicy)
		}
	}
}

func TestRefusedRoot(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for dir, refused := range map[string]bool{
		"/": true, "/etc": true, "/etc/app": true, "/usr/local/share": true, "/var": true, "/var/lib": true,
		"/var/lib/docker/volumes/x": true, "/proc/self": true, "/home": true, "/home/someone": true, "/root": true,
		"/tmp": true, "/run/user/1000": true, home: true, filepath.Dir(home): true,
		filepath.Join(home, "tasks", "t1"): false, "/srv/tasks/t1": false, "/home/someone/tasks": false, "/opt/evals/x": false,
	} {
		if got := RefusedRoot(dir) != ""; got != refused {
			t.Errorf("RefusedRoot(%s) = %q, want refused %v", dir, RefusedRoot(dir), refused)
		}
	}
	// A project whose directory is refused: no host path is allowed, and the error says why.
	_, err := Load(t.Context(), FromYAML([]byte("services:\n  default:\n    image: busybox\n    volumes: [\"./x:/x\"]\n"), home), LoadOptions{})
	if vs := problemsOf(t, err); len(vs) != 1 || !strings.Contains(err.Error(), "cannot be a root") || vs[0].Rule != "host-path" {
		t.Errorf("Load in the home directory = %v", err)
	}
	// A project without host paths runs from anywhere.
	if _, err := Load(t.Context(), FromYAML([]byte("services:\n  default:\n    image: busybox\n"), "/"), LoadOptions{}); err != nil {
		t.Errorf("Load in / without host paths: %v", err)
	}
	if _, err := Load(t.Context(), FromYAML([]byte("services:\n  default:\n    image: busybox\n"), ""), LoadOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Load without a working directory = %v", err)
	}
}

func TestResolvePath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	writeFiles(t, dir, map[string]string{"real/sub/": ""})
	os.Symlink(real, filepath.Join(dir, "abs"))
	os.Symlink("real/sub", filepath.Join(dir, "rel"))
	os.Symlink("/nonexistent/target", filepath.Join(dir, "dangling"))
	resolvedDir := ResolvePath(dir)
	for in, want := range map[string]string{
		dir + "/abs/sub":         filepath.Join(resolvedDir, "real", "sub"),
		dir + "/rel/x/y":         filepath.Join(resolvedDir, "real", "sub", "x", "y"),
		dir + "/dangling/z":      "/nonexistent/target/z",
		dir + "/missing/../real": filepath.Join(resolvedDir, "real"),
		"/":                      "/",
	} {
		if got := ResolvePath(in); got != want {
			t.Errorf("ResolvePath(%q) = %q, want %q", in, got, want)
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

func TestPolicySummary(t *testing.T) {
	if s := DefaultPolicy().Summary(); !strings.HasPrefix(s, "default: every opt-in denied (privileged,") {
		t.Errorf("default summary = %q", s)
	}
	p := Policy{AllowCapabilities: []string{"SYS_PTRACE"}, AllowedMountRoots: []string{"/data"}, Memory: 512 << 20, EgressOff: true}
	p.Allow("devices")
	want := "relaxed: allows devices; extra capabilities SYS_PTRACE; extra mount roots /data; defaults: memory 512 MiB, egress off"
	if s := p.Summary(); s != want {
		t.Errorf("summary = %q\nwant %q", s, want)
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
	hostAccess := &Policy{AllowHostAccess: true}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": yml})
	t.Run("no-op", func(t *testing.T) {
		p := mustLoad(t, dir, LoadOptions{Policy: hostAccess})
		before, _ := p.MarshalYAML()
		DefaultPolicy().ApplyDefaults(p)
		if after, _ := p.MarshalYAML(); string(after) != string(before) {
			t.Errorf("ApplyDefaults without defaults changed the project:\n%s", after)
		}
	})
	t.Run("limits and egress", func(t *testing.T) {
		p := mustLoad(t, dir, LoadOptions{Policy: hostAccess})
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

// A secret of an included file takes its variable from the include's env_file, as compose
// reads it; the variable stays out of the project's own.
func TestIncludeEnvFileReachesSecrets(t *testing.T) {
	p := mustLoad(t, filepath.Join(rulesDir, "include-env-secret"), LoadOptions{})
	if got := p.Secrets["target_token"].Content; got != "tok-from-the-include" {
		t.Errorf("secret content %q, want the include's env_file value", got)
	}
	if _, ok := p.Environment["TARGET_TOKEN"]; ok {
		t.Error("the include's variable leaked into the project's variables")
	}
	// Given by the runner instead, the runner's value is the secret (what the project's own
	// variables say is what compose reads when nothing in the include set it).
	yml := "services:\n  default:\n    image: busybox\n    secrets: [s]\nsecrets:\n  s:\n    environment: TOKEN\n"
	p, err := Load(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{Environment: map[string]string{"TOKEN": "runner"}})
	if err != nil || p.Secrets["s"].Content != "runner" {
		t.Errorf("Load = %v, content %q", err, p.Secrets["s"].Content)
	}
}
