package kubernetes

import (
	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resources maps a service's limits and reservations onto its container. cpus (or
// cpu_quota/cpu_period), mem_limit and deploy.resources.limits become limits;
// mem_reservation and deploy.resources.reservations become requests, never above the limit.
// A limit without a reservation gets a request of zero, written out: left unset, Kubernetes
// would copy the limit into the request, and the ceiling every container gets by default (a
// quarter of the node's memory, as on Docker) would then reserve that much per pod, so a
// four-service sample would never be scheduled. Like Docker, the cluster reserves only what a
// service asks to reserve. The service's own keys win over its deploy section, as compose's
// do.
//
// pids_limit and deploy.resources.limits.pids have no per-pod form: a pod's pids limit is the
// kubelet's podPidsLimit, one value for the node (see pidsLimit).
func resources(svc types.ServiceConfig) corev1.ResourceRequirements {
	var lim, res types.Resource
	if svc.Deploy != nil {
		if svc.Deploy.Resources.Limits != nil {
			lim = *svc.Deploy.Resources.Limits
		}
		if svc.Deploy.Resources.Reservations != nil {
			res = *svc.Deploy.Resources.Reservations
		}
	}
	cpus := float64(svc.CPUS)
	if cpus == 0 && svc.CPUQuota > 0 {
		period := svc.CPUPeriod
		if period <= 0 {
			period = 100000 // the kernel's default CFS period, in microseconds
		}
		cpus = float64(svc.CPUQuota) / float64(period)
	}
	if cpus == 0 {
		cpus = float64(lim.NanoCPUs)
	}
	mem := int64(svc.MemLimit)
	if mem == 0 {
		mem = int64(lim.MemoryBytes)
	}
	reqCPUs, reqMem := float64(res.NanoCPUs), int64(svc.MemReservation)
	if reqMem == 0 {
		reqMem = int64(res.MemoryBytes)
	}
	if cpus > 0 && reqCPUs > cpus {
		reqCPUs = cpus
	}
	if mem > 0 && reqMem > mem {
		reqMem = mem
	}
	var r corev1.ResourceRequirements
	put := func(list *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
	}
	if m := milliCPUs(cpus); m > 0 {
		put(&r.Limits, corev1.ResourceCPU, *resource.NewMilliQuantity(m, resource.DecimalSI))
	}
	if mem > 0 {
		put(&r.Limits, corev1.ResourceMemory, *resource.NewQuantity(mem, resource.BinarySI))
	}
	if m := milliCPUs(reqCPUs); m > 0 || r.Limits.Cpu().Sign() > 0 {
		put(&r.Requests, corev1.ResourceCPU, *resource.NewMilliQuantity(m, resource.DecimalSI))
	}
	if reqMem > 0 || mem > 0 {
		put(&r.Requests, corev1.ResourceMemory, *resource.NewQuantity(reqMem, resource.BinarySI))
	}
	return r
}

// milliCPUs rounds a CPU count to millicores, the finest a pod spec takes; a positive count
// never rounds to nothing.
func milliCPUs(cpus float64) int64 {
	if cpus <= 0 {
		return 0
	}
	return max(1, int64(cpus*1000+0.5))
}

// pidsLimit is the service's pids limit, which a pod spec cannot carry.
func pidsLimit(svc types.ServiceConfig) int64 {
	if svc.PidsLimit > 0 {
		return svc.PidsLimit
	}
	if svc.Deploy != nil && svc.Deploy.Resources.Limits != nil {
		return svc.Deploy.Resources.Limits.Pids
	}
	return 0
}
