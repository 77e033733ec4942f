package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/composebox/composebox/internal/errdefs"
)

// A dependent's pod is created with its dependencies', long before they meet their
// conditions, and an init container, the start gate, holds its command back until composebox
// releases it. The pod's sandbox, its network policies, its binds and its names all get ready
// while the dependencies start, and what is left once they are ready is the release (one
// exec) and the kubelet starting the service's container. Creating the pod only once the
// dependencies were ready cost more than a second per wave on the test cluster: the kubelet
// notices a pod's changes (an address, an init container's end) at its next relist of the
// node's containers, once a second. A pod that gets a dependency's names as hostAliases still
// waits for that dependency's address.
//
// The gate also waits, before it can be released, until each dependency it shares a network
// with answers a ping by name. A NetworkPolicy is enforced by the network
// plugin some time after a new pod gets its address (seconds, on a busy node), and until then
// that pod's packets are dropped; a dependent whose first instruction connects to its
// dependency, which compose's depends_on promises will work, would hang in TCP's
// retransmissions instead. An allow rule without ports lets ICMP through as it lets TCP, so an
// answered ping means the rule is in force. A name answers only once the cluster's DNS has it
// too, which it has once the endpoint controller has published the dependency's address (on
// a busy node, after the pod runs). A name that does not resolve fails at once, hence the
// pause between tries. The pings are a barrier, not a check: past gatePingSeconds the gate
// stops trying and waits for its release, then tries the dependencies that did not answer for
// as long again, before the service's command starts.

// gateName is the start gate's init container.
const gateName = "composebox-start"

const (
	// gateFIFO is where the release is written. Either side makes the FIFO, whichever comes
	// first; neither polls.
	gateFIFO = "/tmp/.composebox-start"
	// gateScript pings each target given after the deadline in $1 seconds, then waits for the
	// release. A target that did not answer by the deadline (on a loaded node a dependency's
	// pod may get its address, and the cluster's DNS its name, later than that) is pinged
	// again once released, when its dependency met its condition and so has its address: for
	// another $1 seconds at most, saying so in the pod's log if it still does not answer.
	gateScript = `secs=$1; shift
end=$(( $(date +%s) + secs ))
late=
for target in "$@"; do
  until ping -c 1 -W 1 "$target" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || { late="$late $target"; continue 2; }
    sleep 0.2
  done
done
mkfifo ` + gateFIFO + ` 2>/dev/null; read -r _ <` + gateFIFO + `
end=$(( $(date +%s) + secs ))
for target in $late; do
  until ping -c 1 -W 1 "$target" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || { echo "composebox-start: $target did not answer a ping within $secs s" >&2; break 2; }
    sleep 0.2
  done
done`
	// gateRelease returns once the gate has read it, so after the pings.
	gateRelease = `mkfifo ` + gateFIFO + ` 2>/dev/null; echo go >` + gateFIFO
)

// gatePingSeconds bounds the gate's pings.
const gatePingSeconds = 30

// needsGate says whether service name waits for other services of the project.
func needsGate(p *types.Project, name string) bool {
	for dep := range p.Services[name].DependsOn {
		if _, ok := p.Services[dep]; ok {
			return true
		}
	}
	return false
}

// gate is service name's start gate; ref is the backend's base image in the registry.
func gate(p *types.Project, name string, ref string) corev1.Container {
	return corev1.Container{
		Name: gateName, Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: append([]string{"sh", "-c", gateScript, "sh", strconv.Itoa(gatePingSeconds)}, gateTargets(p, name)...),
		// Root with NET_RAW alone: what ping's raw socket needs.
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), RunAsNonRoot: ptr(false),
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_RAW"}},
		},
	}
}

// gateTargets are the names the gate pings: the dependencies of name that it shares a network
// with, and that it may talk to. A one-shot it waits to see finish is not one (its address is
// gone once it exited), and a service without egress pings nothing, as nothing would answer.
func gateTargets(p *types.Project, name string) []string {
	svc := p.Services[name]
	mine, egress, err := serviceNetworks(p, svc)
	if err != nil || egress == egressNone {
		return nil
	}
	var names []string
	for _, dep := range slices.Sorted(maps.Keys(svc.DependsOn)) {
		if _, ok := p.Services[dep]; !ok || svc.DependsOn[dep].Condition == types.ServiceConditionCompletedSuccessfully {
			continue
		}
		theirs, _, err := serviceNetworks(p, p.Services[dep])
		if err != nil || !slices.ContainsFunc(theirs, func(n string) bool { return slices.Contains(mine, n) }) {
			continue
		}
		names = append(names, dnsName(dep))
	}
	return names
}

// aliasedDependencies are the dependencies of name whose names it gets as hostAliases
// (hosts.go): its pod is created only once they have addresses.
func aliasedDependencies(p *types.Project, name string) []string {
	var out []string
	for _, h := range hostsOnlyNames(p)[name] {
		if _, dep := p.Services[name].DependsOn[h.target]; dep && aliasable(h.name) && !slices.Contains(out, h.target) {
			out = append(out, h.target)
		}
	}
	return out
}

// release lets service's gated pod start its command. The gate most often runs already when
// the dependencies are ready, but the pod's status says so only once the kubelet next looks
// (within a second): the release is tried at once, and only a failed try waits for the status
// (an earlier attempt of this same Up may also have released it already).
func (b *Backend) release(ctx context.Context, w *podWatch, p *types.Project, service string, pod *corev1.Pod) error {
	what := fmt.Sprintf("kubernetes up %s: start service %s", p.Name, service)
	var stderr bytes.Buffer
	run := func() (int, error) {
		stderr.Reset()
		return b.execIn(ctx, p.Name, pod.Name, gateName, []string{"sh", "-c", gateRelease}, nil, io.Discard, &limitWriter{w: &stderr, limit: 4 << 10})
	}
	code, err := run()
	if err != nil && ctx.Err() == nil {
		done, aerr := b.awaitInit(ctx, w, p, service, gateName, "start")
		if aerr != nil || done {
			return aerr
		}
		code, err = run()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s: the start gate's release exited %d: %s", what, code, strings.TrimSpace(stderr.String())))
	}
	return nil
}
