package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator"
)

// dockerOrchestrator is an orchestrator on the local Docker Engine, to compare with.
func dockerOrchestrator(t *testing.T) *orchestrator.Orchestrator {
	t.Helper()
	o, err := orchestrator.New(orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// start is TaskInit then SampleInit, the sample removed at the end; it returns the first
// error.
func start(t *testing.T, o *orchestrator.Orchestrator, name, yaml string) (*orchestrator.Sample, error) {
	t.Helper()
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, YAML: []byte(yaml)})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	return s, err
}

// From the attacker's side: every compose file the default policy refuses on Docker is
// refused on Kubernetes with the same typed error and the same words, and nothing of it is
// created on the cluster.
func TestPolicyRefusalsMatchDocker(t *testing.T) {
	c := newCluster(t)
	k8sO := c.orchestrator(t)
	dockerO := dockerOrchestrator(t)
	const head = "services:\n  default:\n    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [\"tail\", \"-f\", \"/dev/null\"]\n"
	attacks := map[string]string{
		"privileged":         "    privileged: true\n",
		"cap-sys-admin":      "    cap_add: [SYS_ADMIN]\n",
		"cap-all":            "    cap_add: [ALL]\n",
		"host-pid":           "    pid: host\n",
		"host-ipc":           "    ipc: host\n",
		"host-network":       "    network_mode: host\n",
		"userns-host":        "    userns_mode: host\n",
		"docker-socket":      "    volumes: [\"/var/run/docker.sock:/docker.sock\"]\n",
		"host-root":          "    volumes: [\"/:/host\"]\n",
		"devices":            "    devices: [\"/dev/kvm:/dev/kvm\"]\n",
		"seccomp-unconfined": "    security_opt: [\"seccomp=unconfined\"]\n",
		"apparmor-unconfine": "    security_opt: [\"apparmor=unconfined\"]\n",
		"host-sysctl":        "    sysctls: {kernel.panic: \"1\"}\n",
		"reserved-label":     "    labels: {dev.composebox.owner: detached}\n",
		"oom-score":          "    oom_score_adj: -1000\n",
		"cgroup-parent":      "    cgroup_parent: /\n",
		"runtime":            "    runtime: runc-unsafe\n",
	}
	for name, attack := range attacks {
		t.Run(name, func(t *testing.T) {
			task := uniqueTask("attack")
			_, dockerErr := start(t, dockerO, task, head+attack)
			_, k8sErr := start(t, k8sO, task, head+attack)
			if dockerErr == nil {
				t.Fatalf("Docker ran the %s attack", name)
			}
			if !errors.Is(dockerErr, errdefs.ErrPolicyViolation) {
				t.Fatalf("Docker: %v, want a policy violation", dockerErr)
			}
			if k8sErr == nil || errdefs.Kind(k8sErr) != errdefs.Kind(dockerErr) || k8sErr.Error() != dockerErr.Error() {
				t.Fatalf("Kubernetes refused with\n  %v\nDocker with\n  %v", k8sErr, dockerErr)
			}
			if left := c.namespaces(t, task); len(left) != 0 {
				t.Fatalf("namespaces made for the refused file: %v", left)
			}
		})
	}
}

// A sample's confinement on Kubernetes is Docker's, seen from inside: the same capability
// sets and seccomp mode for root and for the sandbox user, the same user for the main
// process, a read-only root that refuses writes; and no privilege escalation at all. A label
// that a cluster would act on (AppArmor) is inert, as on Docker. The pod spec says why.
func TestConfinementMatchesDocker(t *testing.T) {
	c := newCluster(t)
	const file = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    user: sandbox
    cap_drop: [NET_RAW]
    cap_add: [CHOWN]
    read_only: true
    labels:
      container.apparmor.security.beta.kubernetes.io/default: unconfined
`
	task := uniqueTask("confine")
	onDocker, err := start(t, dockerOrchestrator(t), task, file)
	if err != nil {
		t.Fatalf("on Docker: %v", err)
	}
	onK8s, err := start(t, c.orchestrator(t), task, file)
	if err != nil {
		t.Fatalf("on Kubernetes: %v", err)
	}
	probe := func(s *orchestrator.Sample, user, script string) string {
		t.Helper()
		res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{User: user, Cmd: []string{"sh", "-c", script}})
		if err != nil {
			t.Fatalf("exec as %q: %v", user, err)
		}
		return fmt.Sprintf("%s%s(exit %d)", res.StdoutText(), res.StderrText(), res.ExitCode)
	}
	for _, user := range []string{"", "root", "sandbox", "4242:4242"} {
		for _, script := range []string{
			`grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|Seccomp):' /proc/self/status`,
			// Users and primary groups; the supplementary list differs (see docs/kubernetes.md).
			`id | sed 's/ groups=.*//'`,
			`touch /probe`,
			`ps -o user,args | grep -E '^[a-z0-9]+ +tail -f'`,
		} {
			if d, k := probe(onDocker, user, script), probe(onK8s, user, script); d != k {
				t.Errorf("as %q, %s:\n Docker:     %q\n Kubernetes: %q", user, script, d, k)
			}
		}
		if got := probe(onK8s, user, `grep NoNewPrivs /proc/self/status`); !strings.Contains(got, "NoNewPrivs:\t1") {
			t.Errorf("as %q on Kubernetes: %q, want no new privileges", user, got)
		}
	}

	pod, err := c.admin.CoreV1().Pods(onK8s.Project()).Get(t.Context(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range pod.Annotations {
		if strings.Contains(k, "kubernetes.io") {
			t.Errorf("pod annotation %s from a compose label", k)
		}
	}
	ctr := pod.Spec.Containers[0]
	sc := ctr.SecurityContext
	var added []string
	for _, cp := range sc.Capabilities.Add {
		added = append(added, string(cp))
	}
	slices.Sort(added)
	want := []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
	if sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		!*sc.ReadOnlyRootFilesystem || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(added, want) {
		t.Errorf("security context %+v, capabilities added %v, want %v", sc, added, want)
	}
	if *sc.RunAsUser != 0 || len(ctr.Command) < 6 || ctr.Command[1] != "-S" || ctr.Command[2] != "1000" || ctr.Command[4] != "1000" {
		t.Errorf("runs as %d with command %v, want root dropping to 1000:1000 through nsenter", *sc.RunAsUser, ctr.Command)
	}
	if pod.Spec.HostPID || pod.Spec.HostNetwork || pod.Spec.HostIPC || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("pod spec shares the host's namespaces or mounts a token: %+v", pod.Spec)
	}
}
