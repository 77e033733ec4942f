package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/egressgw"
	"github.com/composebox/composebox/internal/errdefs"
)

// A service with an egress allowlist (compose.EgressOf) reaches the world only through an
// egress gateway, as on Docker (docs/security.md, "Egress by domain"): a pod in the sample's
// namespace running composebox's own gateway (`composebox __egress-gateway`, the image the
// Docker backend builds, pushed like any sample image). What holds it:
//
//   - The restricted pod's egress policy (composebox-egress-gateway) lets it reach the
//     sample's own pods and nothing else: not the cluster's DNS, not the world. Its networks
//     become internal, as on Docker, so a service sharing one reaches no further either.
//   - Its resolver is its gateway's pod address (dnsPolicy None), searching the namespace's
//     domain only, so that short names of siblings still resolve. The gateway forwards names
//     inside "<namespace>.svc.cluster.local" to the cluster DNS, which answers them itself,
//     and applies the allowlist to every other name: a name not listed gets NXDOMAIN and is
//     never asked anywhere.
//   - The gateway's ingress policy lets in only its own services' pods, on DNS and the
//     allowlist's ports; its own egress is the open-egress confinement of every sample
//     (egress.go: never the nodes, this machine, the service ranges, other engines).
//
// The gateway tells services apart by which gateway they reach: the restricted services are
// grouped by their allowlist and each group has a gateway of its own, which only the group's
// pods may reach. No address lookup is trusted for a service's identity.

const (
	// gatewayPrefix + "-N" names a sample's gateway pods.
	gatewayPrefix = "composebox-egress"
	// egressGateway is the egress label of a restricted pod.
	egressGateway = "gateway"
	// gatewayLabel, on a gateway pod, is its own name; gatewayViaLabel, on a restricted pod,
	// names the gateway it reaches.
	gatewayLabel    = "composebox.dev/egress-gateway"
	gatewayViaLabel = "composebox.dev/egress-via"

	policyEgressGateway = "composebox-egress-gateway"
	// clusterDomain is the cluster's DNS domain (kubelet's clusterDomain; every common
	// distribution's default).
	clusterDomain = "cluster.local"
	// gatewayAllowFile is where SetEgress writes the list (an emptyDir).
	gatewayAllowFile = "/run/egress/allow"
	gatewayBinary    = "/composebox"
	gatewayUID       = 65534
)

// EgressImager is the part of Options.Images that builds the egress gateway's image
// (dockerbackend.Backend). Without it, a sample with an allowlist fails prerequisite.
type EgressImager interface {
	EgressImage(ctx context.Context) (string, error)
}

// egressGroup is one gateway and the restricted services that reach the world through it.
type egressGroup struct {
	gateway  string
	services []string
	allow    []string
}

// restricted reports a service behind a gateway: one with an allowlist, on the sample's
// networks (with network_mode none it reaches nothing already).
func restricted(svc types.ServiceConfig) bool {
	_, ok := compose.EgressOf(svc)
	return ok && strings.ToLower(svc.NetworkMode) != "none"
}

// egressGroups are the project's gateways: one per distinct allowlist, in the order of their
// first service's name, so that a retried Up names them the same.
func egressGroups(p *types.Project) []egressGroup {
	var out []egressGroup
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		svc := p.Services[name]
		if !restricted(svc) {
			continue
		}
		allow, _ := compose.EgressOf(svc)
		i := slices.IndexFunc(out, func(g egressGroup) bool { return slices.Equal(g.allow, allow) })
		if i < 0 {
			out = append(out, egressGroup{gateway: fmt.Sprintf("%s-%d", gatewayPrefix, len(out)), allow: allow})
			i = len(out) - 1
		}
		out[i].services = append(out[i].services, name)
	}
	return out
}

// gatewayOf is the gateway of a restricted service.
func gatewayOf(p *types.Project, service string) string {
	for _, g := range egressGroups(p) {
		if slices.Contains(g.services, service) {
			return g.gateway
		}
	}
	return ""
}

// ports are the ports a group's gateway proxies: its list's, else 80 and 443 (what a rule
// without a port allows), as on Docker.
func (g egressGroup) ports() []int {
	list, _ := egressgw.ParseAllowlist(g.allow)
	if ports := list.Ports(); len(ports) > 0 {
		return ports
	}
	return slices.Clone(egressgw.DefaultPorts)
}

// withEgress is p with every network of a restricted service internal, as on Docker: a
// service sharing one loses its route out too, so that it is no way around the list. p is
// not changed.
func withEgress(p *types.Project) *types.Project {
	groups := egressGroups(p)
	if len(groups) == 0 {
		return p
	}
	cp := *p
	cp.Networks = maps.Clone(p.Networks)
	if cp.Networks == nil {
		cp.Networks = types.Networks{}
	}
	for _, g := range groups {
		for _, name := range g.services {
			nets := slices.Collect(maps.Keys(p.Services[name].Networks))
			if len(nets) == 0 {
				nets = []string{"default"}
			}
			for _, key := range nets {
				n := cp.Networks[key]
				n.Internal = true
				cp.Networks[key] = n
			}
		}
	}
	return &cp
}

// namespaceDomain is the DNS domain of a sample's Services.
func namespaceDomain(ns string) string { return ns + ".svc." + clusterDomain }

// gatewayDNS points a restricted pod's resolver at its gateway and marks which one it is.
func (b *Backend) gatewayDNS(ctx context.Context, p *types.Project, svc types.ServiceConfig, pod *corev1.Pod) error {
	if !restricted(svc) {
		return nil
	}
	gw := gatewayOf(p, svc.Name)
	cur, err := b.cs.CoreV1().Pods(p.Name).Get(ctx, gw, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes up %s: service %s: its egress gateway: %w", p.Name, svc.Name, err)
	}
	if cur.Status.PodIP == "" {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("kubernetes up %s: service %s: its egress gateway %s has no address yet", p.Name, svc.Name, gw))
	}
	pod.Labels[gatewayViaLabel] = gw
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{
		Nameservers: []string{cur.Status.PodIP},
		// The namespace's domain only: a sibling's short name resolves, and a name of the
		// world is asked as it is, once.
		Searches: []string{namespaceDomain(p.Name)},
		Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("1")}},
	}
	return nil
}

// upstreamDNS is where the gateways resolve allowed names: the project's --egress-resolver,
// else the cluster DNS (kube-dns's Service, else the resolver given in Options.DNS).
func upstreamDNS(p *types.Project, cf confinement) (string, error) {
	if r, ok := p.Extensions[compose.EgressResolverExtension].(string); ok && r != "" {
		return r, nil
	}
	if cf.clusterDNS.IsValid() {
		return net.JoinHostPort(cf.clusterDNS.String(), "53"), nil
	}
	return "", errdefs.New(errdefs.ErrPrerequisite, "kubernetes up "+p.Name+": an egress allowlist needs a resolver for the gateway: the cluster has no kube-dns Service; set "+EnvDNS+" or --egress-resolver")
}

// startGateways creates the project's gateway pods and waits until each runs with an address,
// which its services' pods then take as their resolver.
func (b *Backend) startGateways(ctx context.Context, p *types.Project, meta map[string]string) error {
	groups := egressGroups(p)
	if len(groups) == 0 {
		return nil
	}
	imgr, ok := b.images.(EgressImager)
	if !ok {
		return notSupported("an egress allowlist: the image builder cannot build the egress gateway's image")
	}
	local, err := imgr.EgressImage(ctx)
	if err != nil {
		return err
	}
	if _, err := b.Image(ctx, local); err != nil {
		return err
	}
	ref, err := b.registryRef(local)
	if err != nil {
		return err
	}
	cf, err := b.confinement(ctx)
	if err != nil {
		return err
	}
	upstream, err := upstreamDNS(p, cf)
	if err != nil {
		return err
	}
	// The sample's own names are the cluster DNS's to answer, whatever --egress-resolver says.
	if !cf.clusterDNS.IsValid() {
		return errdefs.New(errdefs.ErrPrerequisite, "kubernetes up "+p.Name+": an egress allowlist needs the cluster DNS's address, to which the gateway forwards the sample's own names: the cluster has no kube-dns Service; set "+EnvDNS)
	}
	forward := net.JoinHostPort(cf.clusterDNS.String(), "53")
	for _, g := range groups {
		pod := gatewayPod(p, g, ref, upstream, forward, meta)
		if _, err := b.cs.CoreV1().Pods(p.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes up %s: create egress gateway %s: %w", p.Name, g.gateway, err)
		}
	}
	for _, g := range groups {
		if err := b.waitGateway(ctx, p.Name, g.gateway); err != nil {
			return err
		}
	}
	return nil
}

// gatewayPod is a group's gateway: composebox's binary, as nobody, with no capability and no
// token, its ports below 1024 opened to it by the pod's own network namespace's sysctl.
func gatewayPod(p *types.Project, g egressGroup, ref, upstream, forward string, meta map[string]string) *corev1.Pod {
	args := []string{"__egress-gateway", "--allow-file", gatewayAllowFile, "--upstream", upstream,
		"--forward-zone", namespaceDomain(p.Name), "--forward-to", forward,
		"--project", p.Name, "--client-service", strings.Join(g.services, ",")}
	var ps []string
	for _, port := range g.ports() {
		ps = append(ps, fmt.Sprint(port))
	}
	args = append(args, "--ports", strings.Join(ps, ","))
	for _, s := range g.services {
		args = append(args, "--service", s+"="+strings.Join(g.allow, ","))
	}
	for _, a := range g.allow {
		args = append(args, "--allow", a)
	}
	for _, c := range compose.EgressCeilingOf(p) {
		args = append(args, "--ceiling", c)
	}
	svcLabels := maps.Clone(meta)
	svcLabels[labels.ComposeProjectLabel] = p.Name
	svcLabels[labels.ComposeServiceLabel] = g.gateway
	lbl, ann := podMeta(svcLabels)
	lbl[gatewayLabel] = g.gateway
	ann[annotationWorkdir], ann[annotationUser] = "/", fmt.Sprint(gatewayUID)
	uid := int64(gatewayUID)
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: g.gateway, Labels: lbl, Annotations: ann},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "gateway", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{gatewayBinary}, Args: args,
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: ptr(true),
					AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
					Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "allow", MountPath: "/run/egress"}},
			}},
			Volumes:       []corev1.Volume{{Name: "allow", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			RestartPolicy: corev1.RestartPolicyAlways,
			SecurityContext: &corev1.PodSecurityContext{
				// DNS on 53 and the proxy on 80 and 443 without CAP_NET_BIND_SERVICE: a
				// namespaced sysctl, on the pod's own network namespace only.
				Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
			},
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  ptr(false), EnableServiceLinks: ptr(false),
		},
	}
}

// waitGateway waits until a gateway pod's container runs and the pod has its address.
func (b *Backend) waitGateway(ctx context.Context, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, b.start)
	defer cancel()
	check := func(pod *corev1.Pod) (bool, error) {
		if pod.Status.Phase == corev1.PodFailed {
			return false, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("kubernetes up %s: egress gateway %s failed: %s %s", ns, name, pod.Status.Reason, pod.Status.Message))
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "CrashLoopBackOff" || w.Reason == "CreateContainerConfigError") {
				return false, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("kubernetes up %s: egress gateway %s: %s: %s", ns, name, w.Reason, w.Message))
			}
			if cs.State.Running != nil && pod.Status.PodIP != "" {
				return true, nil
			}
		}
		return false, nil
	}
	for {
		cur, err := b.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes up %s: egress gateway %s: %w", ns, name, err)
		}
		if ok, err := check(cur); ok || err != nil {
			return err
		}
		w, err := b.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.ResourceVersion})
		if err != nil {
			return fmt.Errorf("kubernetes up %s: egress gateway %s: %w", ns, name, err)
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			if ok, err := check(pod); ok || err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("kubernetes up %s: egress gateway %s: not running within %s", ns, name, b.start))
		}
	}
}
