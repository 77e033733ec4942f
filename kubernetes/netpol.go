package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// A sample's compose networks become NetworkPolicies in its namespace. Nothing outside the
// sample reaches in: one policy denies every pod all ingress, and one per network lets the
// pods on that network (a label each) reach one another, so two services talk only when they
// share a network, as on Docker's bridges. Egress is open but for the addresses no sample may
// reach (egress.go: the nodes, the machine composebox runs on, the service range, other
// engines' networks), except for the cluster's DNS; a service whose every network is internal
// (`internal: true`; the policy's egress-off makes a project's networks internal) reaches only
// the sample's pods (their ingress decides which) and the cluster's DNS; and a service with
// network_mode: none reaches nothing at all.
//
// Enforcement is the cluster's network plugin's: one without NetworkPolicy support accepts the
// policies and enforces none of them.

const (
	// networkLabelPrefix + a network's key, "true", marks a pod on that network.
	networkLabelPrefix = "network.composebox.dev/"
	// egressLabel marks a pod whose egress is cut: egressPeers (internal networks only) or
	// egressNone (network_mode: none).
	egressLabel = "composebox.dev/egress"
	egressPeers = "peers"
	egressNone  = "none"

	policyDenyIngress = "composebox-deny-ingress"
	policyEgress      = "composebox-egress"
	policyEgressPeers = "composebox-egress-peers"
	policyEgressNone  = "composebox-egress-none"
	policyNetwork     = "composebox-network-"
)

// networkLabel is the label key marking the pods on network key.
func networkLabel(key string) string {
	name := labelValue(key)
	if name == "" {
		name = "network"
	}
	return networkLabelPrefix + name
}

// serviceNetworks are the networks a service's pod joins, sorted, and its egress label ("" for
// open egress). network_mode service:X and host have no pod form: they are refused.
func serviceNetworks(p *types.Project, svc types.ServiceConfig) (nets []string, egress string, err error) {
	switch mode := strings.ToLower(svc.NetworkMode); {
	case mode == "none":
		return nil, egressNone, nil
	case mode == "host":
		return nil, "", notSupported("service " + svc.Name + ": network_mode: host (a pod of the sample never shares the node's network)")
	case strings.HasPrefix(mode, "service:") || strings.HasPrefix(mode, "container:"):
		return nil, "", notSupported("service " + svc.Name + ": network_mode: " + svc.NetworkMode + " (each service is a pod of its own)")
	}
	nets = slices.Sorted(maps.Keys(svc.Networks))
	if len(nets) == 0 {
		// Compose puts a service without networks on the project's default network.
		nets = []string{"default"}
	}
	internal := true
	for _, n := range nets {
		internal = internal && bool(p.Networks[n].Internal)
	}
	switch {
	case restricted(svc):
		egress = egressGateway // egressgateway.go
	case internal:
		egress = egressPeers
	}
	return nets, egress, nil
}

// networkPodLabels puts a service's network and egress labels on its pod.
func networkPodLabels(p *types.Project, svc types.ServiceConfig, pod *corev1.Pod) error {
	nets, egress, err := serviceNetworks(p, svc)
	if err != nil {
		return err
	}
	for _, n := range nets {
		pod.Labels[networkLabel(n)] = "true"
	}
	if egress != "" {
		pod.Labels[egressLabel] = egress
	}
	return nil
}

// networkPolicies are the policies of a project's namespace, which cf keeps from the world
// around it (egress.go).
func networkPolicies(p *types.Project, cf confinement) ([]*netv1.NetworkPolicy, error) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{labels.LabelManaged: "true", labels.ComposeProjectLabel: labelValue(p.Name)}}
	}
	ingress := []netv1.PolicyType{netv1.PolicyTypeIngress}
	egress := []netv1.PolicyType{netv1.PolicyTypeEgress}
	out := []*netv1.NetworkPolicy{{ObjectMeta: meta(policyDenyIngress), Spec: netv1.NetworkPolicySpec{PolicyTypes: ingress}}}
	used := map[string]bool{}
	var open, peers, none bool
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		nets, eg, err := serviceNetworks(p, p.Services[name])
		if err != nil {
			return nil, err
		}
		for _, n := range nets {
			used[n] = true
		}
		open, peers, none = open || eg == "", peers || eg == egressPeers, none || eg == egressNone
	}
	groups := egressGroups(p)
	// A gateway's own egress is the open one.
	open = open || len(groups) > 0
	seen := map[string]bool{}
	for _, n := range slices.Sorted(maps.Keys(used)) {
		key := networkLabel(n)
		name := dnsName(policyNetwork + strings.TrimPrefix(key, networkLabelPrefix))
		if seen[name] {
			continue // two keys that fit into the same label share it, and its policy
		}
		seen[name] = true
		on := metav1.LabelSelector{MatchLabels: map[string]string{key: "true"}}
		out = append(out, &netv1.NetworkPolicy{ObjectMeta: meta(name), Spec: netv1.NetworkPolicySpec{
			PodSelector: on, PolicyTypes: ingress,
			Ingress: []netv1.NetworkPolicyIngressRule{{From: []netv1.NetworkPolicyPeer{{PodSelector: &on}}}},
		}})
	}
	if open {
		// Everywhere but the denied addresses; the sample's own pods (wherever they are) and
		// the cluster's DNS even if they lie in a denied range.
		out = append(out, &netv1.NetworkPolicy{ObjectMeta: meta(policyEgress), Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: egressLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}},
			PolicyTypes: egress,
			Egress: []netv1.NetworkPolicyEgressRule{
				{To: allBut(cf.denied)},
				{To: []netv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{To: dnsPeers(cf), Ports: dnsPorts()},
			},
		}})
	}
	if peers {
		out = append(out, &netv1.NetworkPolicy{ObjectMeta: meta(policyEgressPeers), Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{egressLabel: egressPeers}},
			PolicyTypes: egress,
			Egress: []netv1.NetworkPolicyEgressRule{
				// The sample's own pods; whether one is a peer is its ingress policies' call.
				{To: []netv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{To: dnsPeers(cf), Ports: dnsPorts()},
			},
		}})
	}
	if len(groups) > 0 {
		// A restricted pod reaches the sample's own pods (their ingress decides which: its
		// networks' peers and its gateway), and nothing else, the cluster's DNS included: a
		// resolver that forwards would carry data out in the names it is asked.
		out = append(out, &netv1.NetworkPolicy{ObjectMeta: meta(policyEgressGateway), Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{egressLabel: egressGateway}},
			PolicyTypes: egress,
			Egress:      []netv1.NetworkPolicyEgressRule{{To: []netv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}},
		}})
	}
	for _, g := range groups {
		// A gateway lets in its own services' pods alone, on DNS and its proxy's ports.
		ports := dnsPorts()
		tcp := corev1.ProtocolTCP
		for _, port := range g.ports() {
			ports = append(ports, netv1.NetworkPolicyPort{Protocol: &tcp, Port: ptr(intstr.FromInt32(int32(port)))})
		}
		out = append(out, &netv1.NetworkPolicy{ObjectMeta: meta(g.gateway), Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{gatewayLabel: g.gateway}},
			PolicyTypes: ingress,
			Ingress: []netv1.NetworkPolicyIngressRule{{
				From:  []netv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{gatewayViaLabel: g.gateway}}}},
				Ports: ports,
			}},
		}})
	}
	if none {
		out = append(out, &netv1.NetworkPolicy{ObjectMeta: meta(policyEgressNone), Spec: netv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{egressLabel: egressNone}},
			PolicyTypes: egress,
		}})
	}
	return out, nil
}

// dnsPeers are where the cluster's DNS may answer: kube-dns's pods (CoreDNS as most clusters
// run it), the addresses given or found, and the resolvers' addresses outside any pod.
func dnsPeers(cf confinement) []netv1.NetworkPolicyPeer {
	peers := []netv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: metav1.NamespaceSystem}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
	}}
	set := slices.Clone(cf.resolvers)
	for _, a := range cf.dns {
		set = append(set, netip.PrefixFrom(a, a.BitLen()))
	}
	for _, p := range minimalPrefixes(set) {
		peers = append(peers, netv1.NetworkPolicyPeer{IPBlock: &netv1.IPBlock{CIDR: p.String()}})
	}
	return peers
}

// allBut is every IPv4 and IPv6 address but those of denied.
func allBut(denied []netip.Prefix) []netv1.NetworkPolicyPeer {
	var peers []netv1.NetworkPolicyPeer
	for _, all := range []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")} {
		block := &netv1.IPBlock{CIDR: all.String()}
		for _, d := range denied {
			if d.Addr().Is4() == all.Addr().Is4() {
				block.Except = append(block.Except, d.String())
			}
		}
		peers = append(peers, netv1.NetworkPolicyPeer{IPBlock: block})
	}
	return peers
}

func dnsPorts() []netv1.NetworkPolicyPort {
	udp, tcp, port := corev1.ProtocolUDP, corev1.ProtocolTCP, intstr.FromInt32(53)
	return []netv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}}
}

// createPolicies puts the project's network policies into its namespace before any pod
// exists, so that no pod ever runs unconfined.
func (b *Backend) createPolicies(ctx context.Context, p *types.Project, _ backend.UpOptions) error {
	cf, err := b.confinement(ctx)
	if err != nil {
		return err
	}
	pols, err := networkPolicies(p, cf)
	if err != nil {
		return err
	}
	for _, pol := range pols {
		if _, err := b.cs.NetworkingV1().NetworkPolicies(p.Name).Create(ctx, pol, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes up %s: create network policy %s: %w", p.Name, pol.Name, err)
		}
	}
	return nil
}
