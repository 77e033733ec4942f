package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/docker/docker/api/types/network"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/subnets"
)

// A sample on a cluster must reach no more of the world around it than a Docker sample does:
// not its node (the node's own services, the kubelet among them), not the machine composebox
// runs on, not the cluster's Services by their virtual addresses (the API server's among
// them), and not the samples of another engine (the local Docker Engine's networks and
// composebox's subnet pool, which other engines number their samples' networks from). Those
// addresses are the exceptions of every open-egress policy (netpol.go). Link-local addresses
// (a cloud's metadata service) are denied too.
//
// The cluster's DNS stays allowed, on port 53 alone, by a rule of its own: kube-dns's pods and
// Service address, the resolvers given (Options.DNS), and port 53 of the nodes' and this
// machine's own addresses and of link-local ones, where a resolver outside any pod listens (a
// node-local cache, or `make k8s`'s CoreDNS on the pods' gateway).
//
// Enforcement is the network plugin's, as for every policy. Traffic from a pod to its own
// node is where plugins differ most; `make k8s`'s cluster guards it beside the policies.

// egressTTL bounds how long a confinement is reused between samples: it changes only when a
// node, an interface or a Docker network comes or goes.
const egressTTL = 10 * time.Second

// linkLocal is where a cloud's metadata service answers.
var linkLocal = netip.MustParsePrefix("169.254.0.0/16")

// confinement is what the network policies of a sample keep it from, and what DNS they let
// through.
type confinement struct {
	// dns are the cluster DNS servers' addresses: those given, and kube-dns's Service's.
	dns []netip.Addr
	// resolvers are the addresses where a DNS server outside any pod may listen: the nodes',
	// this machine's, link-local ones (port 53 only).
	resolvers []netip.Prefix
	// denied are the addresses no sample reaches, resolvers included.
	denied []netip.Prefix
	// clusterDNS is where a pod asks the cluster's names: kube-dns's Service, else the first
	// resolver given (invalid with neither).
	clusterDNS netip.Addr
}

// egressCache holds the last confinement computed, and when.
type egressCache struct {
	mu  sync.Mutex
	at  time.Time
	cur confinement
}

// confinement reads what the network policies of a sample need from the world around it,
// reusing what was read within egressTTL.
func (b *Backend) confinement(ctx context.Context) (confinement, error) {
	c := &b.egress
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < egressTTL {
		return c.cur, nil
	}
	var out confinement
	out.dns = slices.Clone(b.dns)
	kubeDNS, err := b.cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	switch {
	case err == nil:
		for _, ip := range kubeDNS.Spec.ClusterIPs {
			if a, perr := netip.ParseAddr(ip); perr == nil {
				out.dns = append(out.dns, a)
			}
		}
	case !apierrors.IsNotFound(err):
		return confinement{}, fmt.Errorf("kubernetes: get the cluster DNS service: %w", err)
	}
	if len(out.dns) > len(b.dns) {
		out.clusterDNS = out.dns[len(b.dns)]
	} else if len(b.dns) > 0 {
		out.clusterDNS = b.dns[0]
	}
	hosts := []netip.Prefix{linkLocal}
	add := func(set *[]netip.Prefix, a netip.Addr) {
		if a.IsValid() && !a.IsLoopback() {
			a = a.Unmap()
			*set = append(*set, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return confinement{}, rbacError(err, "list the nodes (their addresses are denied to samples)")
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				add(&hosts, parseAddr(a.Address))
			}
		}
		// A bridge plugin's gateway, the node's address on its pods' network, is the range's
		// first address.
		for _, cidr := range n.Spec.PodCIDRs {
			if p, perr := netip.ParsePrefix(cidr); perr == nil {
				add(&hosts, p.Masked().Addr().Next())
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return confinement{}, fmt.Errorf("kubernetes: this machine's addresses: %w", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			ip, _ := netip.AddrFromSlice(ipn.IP)
			add(&hosts, ip)
		}
	}
	others := []netip.Prefix{subnets.Default.Base}
	cidrs, err := b.serviceCIDRs(ctx)
	switch {
	case err == nil:
		others = append(others, cidrs...)
	case apierrors.IsNotFound(err):
		// A cluster older than the ServiceCIDR API (1.33): the API server's own Service
		// address, the one that matters most.
		if svc, gerr := b.cs.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); gerr == nil {
			for _, ip := range svc.Spec.ClusterIPs {
				add(&others, parseAddr(ip))
			}
		}
	default:
		return confinement{}, rbacError(err, "list the service CIDRs (they are denied to samples)")
	}
	nets, err := b.docker.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return confinement{}, errdefs.Wrap(errdefs.ErrUnavailable, err, "kubernetes: list the local Docker Engine's networks (they are denied to samples)")
	}
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if p, perr := netip.ParsePrefix(c.Subnet); perr == nil {
				others = append(others, p.Masked())
			}
		}
	}
	out.resolvers = minimalPrefixes(slices.Clone(hosts))
	out.denied = minimalPrefixes(append(hosts, others...))
	c.at, c.cur = time.Now(), out
	return out, nil
}

// serviceCIDRs are the cluster's service ranges (the ServiceCIDR API, networking.k8s.io/v1
// since Kubernetes 1.33; read raw, as the client library this module uses predates it).
func (b *Backend) serviceCIDRs(ctx context.Context) ([]netip.Prefix, error) {
	raw, err := b.cs.NetworkingV1().RESTClient().Get().AbsPath("/apis/networking.k8s.io/v1/servicecidrs").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Spec struct {
				CIDRs []string `json:"cidrs"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("kubernetes: read the service CIDRs: %w", err)
	}
	var out []netip.Prefix
	for _, c := range list.Items {
		for _, s := range c.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out, nil
}

func parseAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}

// rbacError explains a refused read the confinement needs.
func rbacError(err error, what string) error {
	if apierrors.IsForbidden(err) {
		return errdefs.Wrap(errdefs.ErrPrerequisite, err, "kubernetes: "+what+": the account lacks the permission; apply docs/kubernetes-rbac.yaml")
	}
	return fmt.Errorf("kubernetes: %s: %w", what, err)
}

// minimalPrefixes sorts prefixes and drops each one another covers, so that a policy's
// exceptions never overlap.
func minimalPrefixes(in []netip.Prefix) []netip.Prefix {
	slices.SortFunc(in, func(a, b netip.Prefix) int {
		if a.Bits() != b.Bits() {
			return a.Bits() - b.Bits()
		}
		return a.Addr().Compare(b.Addr())
	})
	var out []netip.Prefix
	for _, p := range in {
		if !slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Addr().Is4() == p.Addr().Is4() && q.Overlaps(p) }) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}
