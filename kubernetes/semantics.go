package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
)

// composeSemantics gives a service's pod what compose means beyond its container: its
// networks (netpol.go), volumes (volumes.go) and binds (binds.go), and its ports. What has no
// form on a cluster fails with a typed error naming it.
func (b *Backend) composeSemantics(ctx context.Context, p *types.Project, svc types.ServiceConfig, pod *corev1.Pod) error {
	if len(svc.Devices) > 0 {
		return notSupported("service " + svc.Name + ": host devices")
	}
	if svc.Deploy != nil && svc.Deploy.Resources.Reservations != nil && len(svc.Deploy.Resources.Reservations.Devices) > 0 {
		return notSupported("service " + svc.Name + ": device reservations (GPUs)")
	}
	if n := pidsLimit(svc); n > 0 {
		// A pod's pids limit is the kubelet's podPidsLimit, one value for the whole node.
		b.log.Debug("pids limit left to the node's kubelet (podPidsLimit)", "service", svc.Name, "pids_limit", n)
	}
	if err := networkPodLabels(p, svc, pod); err != nil {
		return err
	}
	if err := b.gatewayDNS(ctx, p, svc, pod); err != nil {
		return err
	}
	var st storage
	if slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Type == types.VolumeTypeVolume && v.Source != "" }) {
		var err error
		if st, err = b.storageFor(ctx); err != nil {
			return err
		}
	}
	if err := podVolumes(p, svc, pod, st); err != nil {
		return err
	}
	if err := b.podBinds(ctx, p, svc, pod); err != nil {
		return err
	}
	pod.Spec.Containers[0].Ports = containerPorts(svc)
	return nil
}

// containerPorts declares the ports a service publishes or exposes. Nothing is published on a
// node: the sample's services reach them by name, and a person by port-forward.
func containerPorts(svc types.ServiceConfig) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	seen := map[string]bool{}
	for _, pc := range svc.Ports {
		proto := corev1.ProtocolTCP
		switch strings.ToLower(pc.Protocol) {
		case "udp":
			proto = corev1.ProtocolUDP
		case "sctp":
			proto = corev1.ProtocolSCTP
		}
		key := fmt.Sprintf("%d/%s", pc.Target, proto)
		if pc.Target == 0 || pc.Target > 65535 || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, corev1.ContainerPort{ContainerPort: int32(pc.Target), Protocol: proto})
	}
	return out
}
