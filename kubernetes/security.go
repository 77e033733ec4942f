package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
)

// The policy is checked before a project reaches a backend, so what a sample may do is
// decided once for both. Here the result is made to mean on a cluster what it means on
// Docker: a pod gets exactly Docker's default confinement (Docker's capability set, its
// seccomp profile's counterpart, no privilege escalation) unless the project has an opt-in
// the policy let through, and a field that would loosen confinement and has no mapping yet
// fails rather than being dropped.

// annotationLabels holds a pod's compose labels, exact, as JSON. A compose label's key never
// becomes a Kubernetes label or annotation key: the cluster and its add-ons act on some
// (container.apparmor.security.beta.kubernetes.io/NAME: unconfined would lift AppArmor,
// sidecar injectors read theirs), while on Docker every label is inert. Only composebox's and
// compose's own keys are labels too, for selectors.
const annotationLabels = annotationPrefix + "labels"

// podMeta splits a service's labels into the pod's labels and annotations.
func podMeta(in map[string]string) (lbl, ann map[string]string) {
	lbl, ann = map[string]string{}, map[string]string{}
	for k, v := range in {
		if ownLabel(k) && len(validation.IsQualifiedName(k)) == 0 {
			lbl[k] = labelValue(v)
			ann[k] = v
		}
	}
	data, _ := json.Marshal(in)
	ann[annotationLabels] = string(data)
	return lbl, ann
}

// podLabels are a pod's compose labels as podMeta stored them.
func podLabels(ann map[string]string) map[string]string {
	out := map[string]string{}
	if err := json.Unmarshal([]byte(ann[annotationLabels]), &out); err != nil || len(out) == 0 {
		for k, v := range ann {
			if ownLabel(k) {
				out[k] = v
			}
		}
	}
	return out
}

// ownLabel reports a key composebox or compose sets (the policy refuses both in a project).
func ownLabel(k string) bool {
	return strings.HasPrefix(k, "dev.composebox.") || strings.HasPrefix(k, "com.docker.compose.")
}

// secure gives the pod's container its confinement and its user: Docker's default capability
// set with cap_add and cap_drop applied, no privilege escalation and no privileges unless the
// service is privileged (which only an opt-in lets through), read_only, the default seccomp
// profile unless unconfined, sysctls, and the user (see users.go).
func (b *Backend) secure(ctx context.Context, svc types.ServiceConfig, pod *corev1.Pod) error {
	if err := unmapped(svc); err != nil {
		return err
	}
	c := &pod.Spec.Containers[0]
	sc, err := securityContext(svc)
	if err != nil {
		return err
	}
	c.SecurityContext = sc
	for _, k := range slices.Sorted(maps.Keys(svc.Sysctls)) {
		if pod.Spec.SecurityContext == nil {
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: k, Value: svc.Sysctls[k]})
	}
	facts, err := b.imageFacts(ctx, svc.Image, svc.Labels)
	if err != nil {
		return err
	}
	return runAs(svc, facts, pod)
}

// runAs sets who the container's processes run as and how its execs get their user.
func runAs(svc types.ServiceConfig, facts *imageFacts, pod *corev1.Pod) error {
	c := &pod.Spec.Containers[0]
	user := svc.User
	if user == "" && facts != nil {
		user = facts.user
	}
	_, envHome := svc.Environment["HOME"]
	if envHome || facts != nil && facts.home {
		pod.Annotations[annotationHome] = "env"
	}
	bad := func(err error) error {
		return errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("kubernetes: service %s: user %s", svc.Name, user))
	}
	if facts == nil || facts.nsenter == "" || len(svc.GroupAdd) > 0 {
		// The container runs as its user: no exec can switch. group_add needs the runtime's
		// supplementary groups, which nsenter would clear.
		var a account
		var err error
		if facts != nil {
			a, err = lookupUser(user, facts.passwd, facts.group)
		} else {
			a, err = numericUser(user)
		}
		if err != nil {
			return bad(err)
		}
		c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup = &a.uid, &a.gid
		if len(svc.GroupAdd) > 0 {
			groups, err := groupIDs(svc.GroupAdd, facts)
			if err != nil {
				return bad(err)
			}
			if pod.Spec.SecurityContext == nil {
				pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
			}
			pod.Spec.SecurityContext.SupplementalGroups = groups
		}
		pod.Annotations[annotationExecAs] = execAsFixed
		return nil
	}
	a, err := lookupUser(user, facts.passwd, facts.group)
	if err != nil {
		return bad(err)
	}
	root, err := lookupUser("", facts.passwd, facts.group)
	if err != nil {
		return bad(err)
	}
	c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup = new(int64(0)), &root.gid
	pod.Annotations[annotationExecAs] = execAsSwitch + facts.nsenter
	if a.uid == 0 && a.gid == root.gid {
		return nil
	}
	drop := []string{facts.nsenter, "-S", strconv.FormatInt(a.uid, 10), "-G", strconv.FormatInt(a.gid, 10), "--"}
	argv := slices.Concat(facts.entrypoint, facts.cmd)
	switch {
	case svc.Entrypoint != nil:
		argv = slices.Concat(svc.Entrypoint, svc.Command)
	case svc.Command != nil:
		argv = slices.Concat(facts.entrypoint, svc.Command)
	}
	if len(argv) == 0 {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("kubernetes: service %s: no command (neither the service nor its image names one)", svc.Name))
	}
	c.Command, c.Args = slices.Concat(drop, argv), nil
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if p != nil && p.Exec != nil {
			p.Exec.Command = slices.Concat(drop, p.Exec.Command)
		}
	}
	if pod.Annotations[annotationHome] == "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "HOME", Value: a.home})
	}
	return nil
}

// numericUser is uid[:gid] (root by name too) when no image files are at hand to resolve names.
func numericUser(u string) (account, error) {
	us, gs, hasGroup := strings.Cut(u, ":")
	a := account{home: "/"}
	var err error
	switch us {
	case "", "root":
	default:
		if a.uid, err = strconv.ParseInt(us, 10, 64); err != nil {
			return a, fmt.Errorf("user %q by name needs the image on the local Docker Engine, to read its /etc/passwd", u)
		}
	}
	if hasGroup && gs != "root" {
		if a.gid, err = strconv.ParseInt(gs, 10, 64); err != nil {
			return a, fmt.Errorf("group %q by name needs the image on the local Docker Engine, to read its /etc/group", gs)
		}
	}
	return a, nil
}

// groupIDs resolves group_add entries (names through the image's /etc/group).
func groupIDs(groups []string, facts *imageFacts) ([]int64, error) {
	out := make([]int64, 0, len(groups))
	for _, g := range groups {
		var gid int64
		var err error
		if facts != nil {
			var a account
			a, err = lookupUser("0:"+g, facts.passwd, facts.group)
			gid = a.gid
		} else {
			gid, err = strconv.ParseInt(g, 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("group_add %s: %w", g, err)
		}
		out = append(out, gid)
	}
	return out, nil
}

// securityContext is the container's confinement as Docker would apply it.
func securityContext(svc types.ServiceConfig) (*corev1.SecurityContext, error) {
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(svc.ReadOnly),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for _, opt := range svc.SecurityOpt {
		key, val, _ := strings.Cut(strings.TrimSpace(opt), "=")
		if !strings.Contains(opt, "=") {
			key, val, _ = strings.Cut(strings.TrimSpace(opt), ":")
		}
		switch {
		case strings.EqualFold(key, "no-new-privileges"):
			// Never allowed to escalate anyway, whatever the value.
		case key == "seccomp" && val == "unconfined":
			sc.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
		case key == "seccomp" && val == "builtin":
		case key == "apparmor" && val == "unconfined":
			sc.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		default:
			return nil, notSupported(fmt.Sprintf("service %s: security_opt %s", svc.Name, opt))
		}
	}
	if svc.Privileged {
		sc.Privileged, sc.AllowPrivilegeEscalation = new(true), new(true)
		return sc, nil
	}
	sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	for _, c := range capabilities(svc.CapAdd, svc.CapDrop) {
		sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(c))
	}
	return sc, nil
}

// capabilities is the set Docker grants for cap_add and cap_drop: its default set plus the
// added minus the dropped; ALL added is every capability (less the dropped), ALL dropped
// leaves only the added.
func capabilities(add, drop []string) []string {
	norm := func(cs []string) []string {
		out := make([]string, 0, len(cs))
		for _, c := range cs {
			out = append(out, compose.NormalizeCap(c))
		}
		return out
	}
	add, drop = norm(add), norm(drop)
	if slices.Contains(add, "ALL") {
		if len(drop) == 0 {
			return []string{"ALL"}
		}
		// The runtime cannot subtract from ALL: list every capability instead.
		add = slices.Concat(allCapabilities, add)
	}
	set := add
	if !slices.Contains(drop, "ALL") {
		set = slices.Concat(compose.DefaultCapabilities(), add)
	}
	var out []string
	for _, c := range set {
		if c != "ALL" && !slices.Contains(drop, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// allCapabilities are the kernel's capabilities, as Docker names them.
var allCapabilities = []string{
	"AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN",
	"DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
	"LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG",
	"SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE",
	"SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "WAKE_ALARM",
}

// unmapped fails a service that uses a field which, on Docker, loosens the container's
// confinement (each needs an opt-in) and has no Kubernetes form here yet: running it without
// would be a different sample, silently.
func unmapped(svc types.ServiceConfig) error {
	var what []string
	for _, ns := range []struct{ field, v string }{{"pid", svc.Pid}, {"ipc", svc.Ipc}, {"uts", svc.Uts}, {"userns_mode", svc.UserNSMode}, {"cgroup", svc.Cgroup}} {
		if ns.v != "" && ns.v != "private" {
			what = append(what, ns.field+": "+ns.v)
		}
	}
	if svc.NetworkMode == "host" {
		what = append(what, "network_mode: host")
	}
	if len(svc.Devices)+len(svc.DeviceCgroupRules)+len(svc.Gpus) > 0 {
		what = append(what, "devices")
	}
	if svc.CgroupParent != "" {
		what = append(what, "cgroup_parent")
	}
	if svc.Runtime != "" || svc.Isolation != "" && svc.Isolation != "default" {
		what = append(what, "runtime or isolation")
	}
	if svc.OomKillDisable || svc.OomScoreAdj < 0 || svc.CPURTRuntime != 0 {
		what = append(what, "host priority (oom_kill_disable, a negative oom_score_adj, realtime CPU)")
	}
	if len(what) == 0 {
		return nil
	}
	return notSupported(fmt.Sprintf("service %s: %s", svc.Name, strings.Join(what, ", ")))
}
