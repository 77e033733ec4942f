package kubernetes

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names a Service cannot carry. A compose alias or container_name may hold dots or
// underscores ("locktalk.chals.local", a CTF's usual victim name), which no Service name can
// hold, so the cluster's DNS never answers them. Such names go into /etc/hosts instead, for
// the pods that share a network with the service, as Docker's DNS answers an alias only on
// its network:
//   - a pod created once its target already has an address gets the entry as a hostAlias,
//     so a dependent resolves its dependencies' names from its first instruction;
//   - the others (targets of the same or a later wave) get it appended to their /etc/hosts
//     by Wait, before the sample is handed over.

// hostsScript appends each argument line to /etc/hosts unless it is there already: Wait runs
// it again on every call.
const hostsScript = `for l in "$@"; do grep -qxF "$l" /etc/hosts 2>/dev/null || echo "$l" >>/etc/hosts || exit 1; done`

// hostName is a name of target that only /etc/hosts can give.
type hostName struct {
	target, name string
}

// hostsOnlyNames are, per service, the names of other services it should resolve that no
// Service can carry.
func hostsOnlyNames(p *types.Project) map[string][]hostName {
	out := map[string][]hostName{}
	for _, target := range p.ServiceNames() {
		tsvc := p.Services[target]
		for net, cfg := range tsvc.Networks {
			var names []string
			if cfg != nil {
				names = append(names, cfg.Aliases...)
			}
			if tsvc.ContainerName != "" {
				names = append(names, tsvc.ContainerName)
			}
			for _, n := range names {
				if dnsName(n) == strings.ToLower(n) {
					continue // a Service of that name answers it
				}
				for _, consumer := range p.ServiceNames() {
					if _, on := p.Services[consumer].Networks[net]; !on {
						continue
					}
					h := hostName{target: target, name: n}
					if !slices.Contains(out[consumer], h) {
						out[consumer] = append(out[consumer], h)
					}
				}
			}
		}
	}
	return out
}

// aliasable reports a name a hostAlias may carry: the API server takes only lowercase DNS
// subdomains there, while /etc/hosts takes any name (an underscore, say, as compose allows).
func aliasable(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// podIP is a pod's address, "" before it has one.
func podIP(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	return pod.Status.PodIP
}

// hostAliases are the entries pod (of service consumer) can get at creation: the names of
// targets that have an address already, pods being the project's pods by service.
func hostAliases(p *types.Project, consumer string, pods map[string]*corev1.Pod) []corev1.HostAlias {
	byIP := map[string][]string{}
	for _, h := range hostsOnlyNames(p)[consumer] {
		if !aliasable(h.name) {
			continue // completeHosts writes it
		}
		if ip := podIP(pods[h.target]); ip != "" && !slices.Contains(byIP[ip], h.name) {
			byIP[ip] = append(byIP[ip], h.name)
		}
	}
	var out []corev1.HostAlias
	for _, ip := range slices.Sorted(maps.Keys(byIP)) {
		out = append(out, corev1.HostAlias{IP: ip, Hostnames: byIP[ip]})
	}
	return out
}

// completeHosts appends to each running pod's /etc/hosts the entries its hostAliases lack
// (running as the kubelet reports it, or as composebox's own probe saw it).
// A pod that cannot take them (no shell, or a container user that may not write the file)
// is logged: its names then do not resolve, and nothing else is lost.
func (b *Backend) completeHosts(ctx context.Context, p *types.Project, w *podWatch) {
	pods, _ := w.view()
	for consumer, names := range hostsOnlyNames(p) {
		pod := pods[consumer]
		if pod == nil || !running(pod) && w.sight(string(pod.UID)) < sightRunning {
			continue
		}
		var lines []string
		for _, h := range names {
			ip := podIP(pods[h.target])
			if ip == "" || slices.ContainsFunc(pod.Spec.HostAliases, func(a corev1.HostAlias) bool {
				return a.IP == ip && slices.Contains(a.Hostnames, h.name)
			}) {
				continue
			}
			lines = append(lines, ip+"\t"+h.name)
		}
		if len(lines) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var errb strings.Builder
		code, err := b.stream(cctx, pod.Namespace+"/"+pod.Name, append([]string{"sh", "-c", hostsScript, "sh"}, lines...), nil, io.Discard, &errb, false, nil)
		cancel()
		if err != nil || code != 0 {
			b.log.Warn("kubernetes: names of other services not added to /etc/hosts", "project", p.Name, "service", consumer,
				"names", lines, "err", fmt.Sprint(err), "exit", code, "stderr", strings.TrimSpace(errb.String()))
		}
	}
}
