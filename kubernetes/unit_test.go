package kubernetes

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

const (
	testPasswd = "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nweird:x:1234:55::/w:/bin/false\n"
	testGroup  = "root:x:0:\nsandbox:x:1000:\nstaff:x:50:sandbox\n"
)

// Users resolve as Docker resolves them: numbers by id (standing for themselves when absent),
// names by name (an absent one fails), groups likewise.
func TestLookupUser(t *testing.T) {
	for spec, want := range map[string]string{
		"":              "0:0:/root",
		"root":          "0:0:/root",
		"0":             "0:0:/root",
		"sandbox":       "1000:1000:/home/sandbox",
		"1000":          "1000:1000:/home/sandbox",
		"1000:0":        "1000:0:/home/sandbox",
		"4242:4242":     "4242:4242:/",
		"4242":          "4242:0:/",
		"weird":         "1234:55:/w",
		"sandbox:staff": "1000:50:/home/sandbox",
		"root:77":       "0:77:/root",
	} {
		a, err := lookupUser(spec, testPasswd, testGroup)
		if got := fmt.Sprintf("%d:%d:%s", a.uid, a.gid, a.home); err != nil || got != want {
			t.Errorf("lookupUser(%q) = %s, %v; want %s", spec, got, err, want)
		}
	}
	for _, spec := range []string{"nobody-here", "sandbox:nogroup", "1000:nogroup"} {
		if _, err := lookupUser(spec, testPasswd, testGroup); err == nil || !strings.Contains(err.Error(), "unable to find") {
			t.Errorf("lookupUser(%q): %v, want unable to find", spec, err)
		}
	}
}

// The exec wrapper resolves a user in the container exactly as lookupUser does on the host,
// under dash and under busybox's sh alike.
func TestUserScriptResolvesLikeLookupUser(t *testing.T) {
	passwd, _ := os.ReadFile("/etc/passwd")
	group, _ := os.ReadFile("/etc/group")
	var shells []string
	for _, sh := range []string{"/bin/sh", "/bin/busybox"} {
		if _, err := os.Stat(sh); err == nil {
			shells = append(shells, sh)
		}
	}
	if len(shells) == 0 {
		t.Fatal("no shell to run the script with")
	}
	// The tail prints what the script would run instead of running it.
	script := userScript + `printf '%s\n' "$@"`
	for _, shell := range shells {
		for _, spec := range []string{"", "root", "0", "nobody", "65534", "4242:4242", "4242", "root:4242", "nobody:root", "no-such-user-x", "root:no-such-group-x"} {
			argv := []string{"-c", script, "sh", spec, "/fake/nsenter", "/", "", "K=V", "cmd", "arg"}
			if strings.HasSuffix(shell, "busybox") {
				argv = append([]string{"sh"}, argv...)
			}
			out, err := exec.Command(shell, argv...).CombinedOutput()
			want, werr := lookupUser(spec, string(passwd), string(group))
			if werr != nil {
				var xe *exec.ExitError
				if !errors.As(err, &xe) || xe.ExitCode() != 126 || !strings.Contains(string(out), "unable to find") {
					t.Errorf("%s, user %q: %v %q; want exit 126 naming it (%v)", shell, spec, err, out, werr)
				}
				continue
			}
			var lines []string
			if want.uid != 0 || want.gid != 0 {
				lines = append(lines, "/fake/nsenter", "-S", fmt.Sprint(want.uid), "-G", fmt.Sprint(want.gid), "--")
			}
			lines = append(lines, "env", "HOME="+want.home, "K=V", "cmd", "arg")
			if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, lines) {
				t.Errorf("%s, user %q: %v\n got %q\nwant %q", shell, spec, err, got, lines)
			}
		}
	}
}

func TestCapabilities(t *testing.T) {
	docker := []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
	for _, c := range []struct {
		add, drop, want []string
	}{
		{nil, nil, docker},
		{[]string{"cap_sys_ptrace"}, []string{"NET_RAW", "CAP_MKNOD"}, slices.Sorted(slices.Values(slices.Concat(slices.DeleteFunc(slices.Clone(docker), func(s string) bool { return s == "NET_RAW" || s == "MKNOD" }), []string{"SYS_PTRACE"})))},
		{[]string{"NET_ADMIN"}, []string{"ALL"}, []string{"NET_ADMIN"}},
		{nil, []string{"all"}, nil},
		{[]string{"ALL"}, nil, []string{"ALL"}},
	} {
		if got := capabilities(c.add, c.drop); !slices.Equal(got, c.want) {
			t.Errorf("capabilities(%v, %v) = %v, want %v", c.add, c.drop, got, c.want)
		}
	}
	all := capabilities([]string{"ALL"}, []string{"SYS_ADMIN"})
	if slices.Contains(all, "SYS_ADMIN") || !slices.Contains(all, "SYS_PTRACE") || slices.Contains(all, "ALL") {
		t.Errorf("ALL less SYS_ADMIN = %v", all)
	}
}

func TestSecurityContext(t *testing.T) {
	sc, err := securityContext(types.ServiceConfig{Name: "x", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if *sc.AllowPrivilegeEscalation || sc.Privileged != nil || !*sc.ReadOnlyRootFilesystem ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		len(sc.Capabilities.Add) != 14 {
		t.Errorf("default confinement: %+v", sc)
	}
	sc, err = securityContext(types.ServiceConfig{Name: "x", Privileged: true})
	if err != nil || !*sc.Privileged || !*sc.AllowPrivilegeEscalation {
		t.Errorf("privileged: %+v, %v", sc, err)
	}
	sc, err = securityContext(types.ServiceConfig{Name: "x", SecurityOpt: []string{"no-new-privileges:false", "seccomp=unconfined", "apparmor:unconfined"}})
	if err != nil || *sc.AllowPrivilegeEscalation || sc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		t.Errorf("security_opt: %+v, %v", sc, err)
	}
	for _, opt := range []string{"label=disable", "seccomp=/some/profile.json", "apparmor=custom"} {
		if _, err := securityContext(types.ServiceConfig{Name: "x", SecurityOpt: []string{opt}}); !errors.Is(err, ErrNotSupported) || !errors.Is(err, errdefs.ErrPrerequisite) {
			t.Errorf("security_opt %s: %v, want not supported", opt, err)
		}
	}
	for _, svc := range []types.ServiceConfig{{Pid: "host"}, {NetworkMode: "host"}, {Devices: []types.DeviceMapping{{Source: "/dev/kvm"}}}, {OomScoreAdj: -500}, {Runtime: "runsc"}} {
		if err := unmapped(svc); !errors.Is(err, ErrNotSupported) {
			t.Errorf("%+v: %v, want not supported", svc, err)
		}
	}
}

// A compose label's key never becomes a pod label or annotation key: on a cluster some are
// acted on (AppArmor, sidecar injection), while on Docker every label is inert.
func TestPodMetaKeepsForeignKeysOut(t *testing.T) {
	in := map[string]string{
		"container.apparmor.security.beta.kubernetes.io/default": "unconfined",
		"sidecar.istio.io/inject":                                "true",
		"plain":                                                  "value",
		labels.LabelTask:                                         "a task with spaces",
		labels.ComposeServiceLabel:                               "web",
	}
	lbl, ann := podMeta(in)
	for _, m := range []map[string]string{lbl, ann} {
		for k := range m {
			if k != annotationLabels && !ownLabel(k) {
				t.Errorf("foreign key %q on the pod", k)
			}
		}
	}
	if lbl[labels.LabelTask] != "a_task_with_spaces" || ann[labels.LabelTask] != "a task with spaces" {
		t.Errorf("own label: %q / %q", lbl[labels.LabelTask], ann[labels.LabelTask])
	}
	if got := podLabels(ann); !mapsEqual(got, in) {
		t.Errorf("labels round trip: %v", got)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A service's user becomes the pod's: with nsenter in the image, the container runs as root
// and its command and probes drop to the user; without, it runs as the user and execs cannot
// switch.
func TestRunAs(t *testing.T) {
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			SecurityContext: &corev1.SecurityContext{},
			ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}},
		}}}}
	}
	facts := &imageFacts{entrypoint: []string{"/entry"}, cmd: []string{"default-cmd"}, user: "sandbox", passwd: testPasswd, group: testGroup, nsenter: "/bin/nsenter"}
	p := pod()
	if err := runAs(types.ServiceConfig{Name: "s"}, facts, p); err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	drop := []string{"/bin/nsenter", "-S", "1000", "-G", "1000", "--"}
	if *c.SecurityContext.RunAsUser != 0 || !slices.Equal(c.Command, slices.Concat(drop, []string{"/entry", "default-cmd"})) || c.Args != nil ||
		!slices.Equal(c.ReadinessProbe.Exec.Command, slices.Concat(drop, []string{"check"})) || p.Annotations[annotationExecAs] != "switch:/bin/nsenter" ||
		!slices.Contains(c.Env, corev1.EnvVar{Name: "HOME", Value: "/home/sandbox"}) {
		t.Errorf("switching pod: %+v %v", c, p.Annotations)
	}
	if m := modeOf(p.Annotations); m.nsenter != "/bin/nsenter" || m.keepHome {
		t.Errorf("mode %+v", m)
	}
	p = pod()
	if err := runAs(types.ServiceConfig{Name: "s", User: "root", Entrypoint: []string{"/other"}}, facts, p); err != nil || p.Spec.Containers[0].Command != nil {
		t.Errorf("root needs no drop: %v %v", p.Spec.Containers[0].Command, err)
	}
	p = pod()
	if err := runAs(types.ServiceConfig{Name: "s", User: "1000:50"}, nil, p); err != nil || *p.Spec.Containers[0].SecurityContext.RunAsUser != 1000 ||
		*p.Spec.Containers[0].SecurityContext.RunAsGroup != 50 || p.Annotations[annotationExecAs] != execAsFixed {
		t.Errorf("numeric user without image files: %+v %v", p.Spec.Containers[0].SecurityContext, err)
	}
	if err := runAs(types.ServiceConfig{Name: "s", User: "sandbox"}, nil, pod()); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("a name without image files: %v", err)
	}
	if err := runAs(types.ServiceConfig{Name: "s", User: "nobody-here"}, facts, pod()); !errors.Is(err, errdefs.ErrInvalidConfig) || !strings.Contains(err.Error(), "nobody-here") {
		t.Errorf("an unknown user: %v", err)
	}
	if _, err := userArgs(execMode{}, "1000", "root", "/"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("switching without nsenter: %v", err)
	}
}

func TestOwnersStatus(t *testing.T) {
	st := map[string]backend.OwnerStatus{"a": backend.StatusAlive, "s": backend.StatusStale, "u": backend.StatusUnknown}
	status := func(o string) backend.OwnerStatus { return st[o] }
	for _, c := range []struct {
		owner, claimer string
		want           backend.OwnerStatus
	}{
		{labels.OwnerDetached, "a", backend.StatusDetached},
		{"s", "", backend.StatusStale},
		{"s", "a", backend.StatusAlive},
		{"s", "u", backend.StatusUnknown},
		{"", "", backend.StatusUnknown},
		{"a", "s", backend.StatusAlive},
	} {
		if got := ownersStatus(c.owner, c.claimer, status); got != c.want {
			t.Errorf("ownersStatus(%q, %q) = %s, want %s", c.owner, c.claimer, got, c.want)
		}
	}
}

// A capture keeps the last bytes and says it cut, however the output is chunked: a single
// chunk of more than twice the limit once left exactly the limit behind, unmarked.
func TestCaptureMarksTruncation(t *testing.T) {
	full := []byte(strings.Repeat("0123456789", 300))
	for _, chunk := range []int{1, 7, 1000, 1001, 2001, len(full)} {
		c := &capture{limit: 1000}
		for p := full; len(p) > 0; {
			n := min(chunk, len(p))
			if _, err := c.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if !c.trunc || c.total != int64(len(full)) || string(c.bytes()) != string(full[len(full)-1000:]) {
			t.Errorf("chunks of %d: truncated %t, total %d, kept %d bytes", chunk, c.trunc, c.total, len(c.bytes()))
		}
	}
	c := &capture{limit: 1000}
	if _, err := c.Write(full[:1000]); err != nil || c.trunc {
		t.Fatalf("exactly the limit: truncated %t, %v", c.trunc, err)
	}
}

func TestMinimalPrefixes(t *testing.T) {
	in := []netip.Prefix{netip.MustParsePrefix("10.213.4.0/27"), netip.MustParsePrefix("10.213.0.0/16"),
		netip.MustParsePrefix("172.17.0.1/32"), netip.MustParsePrefix("172.17.0.0/16"), netip.MustParsePrefix("10.244.0.1/32"),
		netip.MustParsePrefix("fe80::1/128"), netip.MustParsePrefix("10.244.0.1/32")}
	got := minimalPrefixes(in)
	want := []string{"10.213.0.0/16", "10.244.0.1/32", "172.17.0.0/16", "fe80::1/128"}
	if len(got) != len(want) {
		t.Fatalf("minimal prefixes %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("minimal prefixes %v, want %v", got, want)
		}
	}
}
