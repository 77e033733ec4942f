package kubernetes

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Restricted services are grouped by allowlist, one gateway each; their networks turn
// internal; their pods reach only the sample's pods; each gateway lets in its own group alone,
// on DNS and its ports; the gateway runs as nobody with nothing.
func TestEgressGatewayPolicies(t *testing.T) {
	p := load(t, "", `
services:
  a: {image: x, networks: [front], x-composebox-egress: [pkgs.test]}
  b: {image: x, networks: [back], x-composebox-egress: [pkgs.test]}
  c: {image: x, networks: [back], x-composebox-egress: ["other.test:8443"]}
  d: {image: x, networks: [back]}
  e: {image: x, networks: [side]}
  off: {image: x, network_mode: none, x-composebox-egress: [pkgs.test]}
networks:
  front: {}
  back: {}
  side: {}
`)
	groups := egressGroups(p)
	if len(groups) != 2 || groups[0].gateway != "composebox-egress-0" || !slices.Equal(groups[0].services, []string{"a", "b"}) ||
		groups[1].gateway != "composebox-egress-1" || !slices.Equal(groups[1].services, []string{"c"}) {
		t.Fatalf("groups %+v", groups)
	}
	q := withEgress(p)
	if p.Networks["back"].Internal || !q.Networks["back"].Internal || !q.Networks["front"].Internal || q.Networks["side"].Internal {
		t.Fatalf("internal networks: given %+v, with egress %+v", p.Networks, q.Networks)
	}
	pols, err := networkPolicies(q, confinement{dns: []netip.Addr{netip.MustParseAddr("10.244.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := func(svc string) map[string]string {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if err := networkPodLabels(q, q.Services[svc], pod); err != nil {
			t.Fatal(err)
		}
		return pod.Labels
	}
	for svc, want := range map[string]string{"a": egressGateway, "c": egressGateway, "d": egressPeers, "e": "", "off": egressNone} {
		if got := labelsOf(svc)[egressLabel]; got != want {
			t.Errorf("egress label of %s = %q, want %q", svc, got, want)
		}
	}
	gw := policyByName(pols, policyEgressGateway)
	if gw == nil || gw.Spec.PodSelector.MatchLabels[egressLabel] != egressGateway || len(gw.Spec.Egress) != 1 ||
		len(gw.Spec.Egress[0].To) != 1 || gw.Spec.Egress[0].To[0].PodSelector == nil || gw.Spec.Egress[0].To[0].IPBlock != nil ||
		gw.Spec.Egress[0].To[0].NamespaceSelector != nil {
		t.Fatalf("egress of restricted pods (the sample's pods only, no DNS): %+v", gw)
	}
	if policyByName(pols, policyEgress) == nil {
		t.Fatal("no open egress policy for the gateways")
	}
	for i, wantPorts := range []string{"UDP/53 TCP/53 TCP/80 TCP/443", "UDP/53 TCP/53 TCP/8443"} {
		name := groups[i].gateway
		in := policyByName(pols, name)
		if in == nil || in.Spec.PodSelector.MatchLabels[gatewayLabel] != name || len(in.Spec.Ingress) != 1 ||
			in.Spec.Ingress[0].From[0].PodSelector.MatchLabels[gatewayViaLabel] != name {
			t.Fatalf("ingress of %s: %+v", name, in)
		}
		var ports []string
		for _, port := range in.Spec.Ingress[0].Ports {
			ports = append(ports, fmt.Sprintf("%s/%s", *port.Protocol, port.Port.String()))
		}
		if strings.Join(ports, " ") != wantPorts {
			t.Errorf("ports of %s: %v, want %s", name, ports, wantPorts)
		}
	}
	pod := gatewayPod(q, groups[0], "reg/gw:1", "10.98.1.53:53", "10.244.0.1:53", map[string]string{})
	sc := pod.Spec.Containers[0].SecurityContext
	if *pod.Spec.AutomountServiceAccountToken || !*sc.RunAsNonRoot || *sc.RunAsUser == 0 || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("gateway pod not locked down: %+v", pod.Spec)
	}
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--client-service a,b", "--forward-zone " + q.Name + ".svc.cluster.local", "--upstream 10.98.1.53:53", "--ports 80,443", "--allow pkgs.test"} {
		if !strings.Contains(args, want) {
			t.Errorf("gateway args %q lack %q", args, want)
		}
	}
}
