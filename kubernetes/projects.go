package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Annotations keep what label values cannot hold (an owner is host:pid:start) and what the
// image says that the pod spec does not (its working directory and user).
const (
	annotationPrefix  = "composebox.dev/"
	annotationWorkdir = annotationPrefix + "workdir"
	annotationUser    = annotationPrefix + "user"
	// annotationPod, on a headless Service, names the pod it selects.
	annotationPod = annotationPrefix + "pod"
)

// namespaceLabels are the composebox labels a namespace carries, copied from a service.
var namespaceLabels = []string{labels.LabelManaged, labels.LabelTask, labels.LabelSample, labels.LabelOwner, labels.LabelCreated, labels.LabelPool}

var invalidLabelValue = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// labelValue fits s into a label value: at most 63 characters of [A-Za-z0-9_.-], alphanumeric
// at both ends. The exact value is kept in an annotation of the same key.
func labelValue(s string) string {
	s = invalidLabelValue.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "_.-")
}

// metaFor splits compose labels into labels (values fitted) and annotations (values exact).
func metaFor(in map[string]string) (lbl, ann map[string]string) {
	lbl, ann = map[string]string{}, map[string]string{}
	for k, v := range in {
		if len(validation.IsQualifiedName(k)) != 0 {
			continue
		}
		lbl[k] = labelValue(v)
		ann[k] = v
	}
	return lbl, ann
}

var invalidDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsName fits a compose name into a DNS-1035 label (a pod, Service or container name), or
// "" when nothing of it fits.
func dnsName(s string) string {
	s = strings.Trim(invalidDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return ""
	}
	return s
}

// Up creates the project's namespace, its network policies and volumes, a headless Service per
// name and a pod per service, in dependency waves (depends.go): a service whose dependencies
// must be started, healthy or completed waits for them first, as compose does. It is
// idempotent under retries: every name is deterministic and an existing object is kept.
func (b *Backend) Up(ctx context.Context, p *types.Project, opts backend.UpOptions) error {
	if len(p.Services) == 0 {
		return errdefs.New(errdefs.ErrInvalidConfig, "kubernetes up "+p.Name+": no services")
	}
	// A restricted service's networks are internal, as on Docker (egressgateway.go).
	p = withEgress(p)
	var first types.ServiceConfig
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		first = p.Services[name]
		break
	}
	nsLabels := map[string]string{}
	for _, k := range namespaceLabels {
		if v, ok := first.Labels[k]; ok {
			nsLabels[k] = v
		} else if v, ok := first.CustomLabels[k]; ok {
			nsLabels[k] = v
		}
	}
	nsLabels[labels.ComposeProjectLabel] = p.Name
	lbl, ann := metaFor(nsLabels)
	vols, err := b.volumeAnnotations(ctx, p)
	if err != nil {
		return err
	}
	maps.Copy(ann, vols)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: lbl, Annotations: ann}}
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes up %s: create namespace: %w", p.Name, err)
	}
	if err := b.createPolicies(ctx, p, opts); err != nil {
		return err
	}
	if err := b.createVolumes(ctx, p); err != nil {
		return err
	}
	gwMeta := map[string]string{}
	maps.Copy(gwMeta, first.Labels)
	maps.Copy(gwMeta, first.CustomLabels)
	if err := b.startGateways(ctx, p, gwMeta); err != nil {
		return err
	}
	return b.startWaves(ctx, p, opts)
}

// hostNames are the names a service answers to on its networks: its name, its aliases and
// its container_name, as DNS labels.
func hostNames(name string, svc types.ServiceConfig) []string {
	names := []string{name}
	for _, n := range svc.Networks {
		if n != nil {
			names = append(names, n.Aliases...)
		}
	}
	if svc.ContainerName != "" {
		names = append(names, svc.ContainerName)
	}
	var out []string
	for _, n := range names {
		if d := dnsName(n); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// createService makes a headless Service named host selecting service's pod. Addresses are
// published before readiness, as compose's DNS answers as soon as a container runs. It keeps
// the pod's name and compose labels, which tell a service whose pod is gone (removedPods).
func (b *Backend) createService(ctx context.Context, ns, host, service string, pod *corev1.Pod) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: host, Labels: map[string]string{labels.LabelManaged: "true", labels.ComposeProjectLabel: ns},
			Annotations: map[string]string{annotationPod: pod.Name, annotationLabels: pod.Annotations[annotationLabels]}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{labels.ComposeProjectLabel: ns, labels.ComposeServiceLabel: labelValue(service)}},
	}
	if _, err := b.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes up %s: create service %s: %w", ns, host, err)
	}
	return nil
}

// podFor maps one compose service onto a bare pod.
func (b *Backend) podFor(ctx context.Context, p *types.Project, svc types.ServiceConfig) (*corev1.Pod, error) {
	name := dnsName(svc.Name)
	if name == "" {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("kubernetes: service name %q makes no DNS name", svc.Name))
	}
	if svc.Image == "" {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, "kubernetes: service "+svc.Name+" has no image")
	}
	info, err := b.Image(ctx, svc.Image)
	if err != nil {
		return nil, err
	}
	ref, err := b.registryRef(svc.Image)
	if err != nil {
		return nil, err
	}
	svcLabels := map[string]string{}
	maps.Copy(svcLabels, svc.Labels)
	maps.Copy(svcLabels, svc.CustomLabels)
	svcLabels[labels.ComposeProjectLabel] = p.Name
	svcLabels[labels.ComposeServiceLabel] = svc.Name
	lbl, ann := podMeta(svcLabels)
	workdir, user := svc.WorkingDir, svc.User
	if img, err := b.docker.ImageInspect(ctx, svc.Image); err == nil && img.Config != nil {
		if workdir == "" {
			workdir = img.Config.WorkingDir
		}
		if user == "" {
			user = img.Config.User
		}
	}
	_ = info
	ann[annotationWorkdir], ann[annotationUser] = workdir, user

	c := corev1.Container{
		Name: name, Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: svc.Entrypoint, Args: svc.Command, WorkingDir: svc.WorkingDir,
		TTY: svc.Tty, Stdin: svc.StdinOpen,
		ReadinessProbe: probe(svc.HealthCheck),
	}
	for _, k := range slices.Sorted(maps.Keys(svc.Environment)) {
		if v := svc.Environment[k]; v != nil {
			c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: *v})
		}
	}
	c.Resources = resources(svc)
	restart := corev1.RestartPolicyNever
	switch {
	case svc.Restart == types.RestartPolicyAlways || svc.Restart == types.RestartPolicyUnlessStopped:
		restart = corev1.RestartPolicyAlways
	case strings.HasPrefix(svc.Restart, types.RestartPolicyOnFailure):
		restart = corev1.RestartPolicyOnFailure
	}
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, Annotations: ann},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{c}, RestartPolicy: restart,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  ptr(false), EnableServiceLinks: ptr(false),
			Hostname: dnsName(svc.Hostname),
			// init: the pod's pause process is PID 1 of a shared PID namespace and reaps
			// zombies, as docker-init does.
			ShareProcessNamespace: svc.Init,
		},
	}
	if err := b.secure(ctx, svc, pod); err != nil {
		return nil, err
	}

	// Compose's semantics beyond the container itself: networks, volumes and binds, ports.
	if err := b.composeSemantics(ctx, p, svc, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

func ptr[T any](v T) *T { return &v }

// probe turns a healthcheck into an exec readiness probe.
func probe(hc *types.HealthCheckConfig) *corev1.Probe {
	if hc == nil || hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
		return nil
	}
	var cmd []string
	switch hc.Test[0] {
	case "CMD":
		cmd = hc.Test[1:]
	case "CMD-SHELL":
		cmd = []string{"/bin/sh", "-c", strings.Join(hc.Test[1:], " ")}
	default:
		cmd = []string{"/bin/sh", "-c", strings.Join(hc.Test, " ")}
	}
	secs := func(d *types.Duration, def int32) int32 {
		if d == nil || *d <= 0 {
			return def
		}
		return int32(math.Ceil(time.Duration(*d).Seconds()))
	}
	pr := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}},
		PeriodSeconds: secs(hc.Interval, 30), TimeoutSeconds: secs(hc.Timeout, 30), FailureThreshold: 3}
	if hc.Retries != nil && *hc.Retries > 0 {
		pr.FailureThreshold = int32(*hc.Retries)
	}
	if hc.StartPeriod != nil {
		pr.InitialDelaySeconds = secs(hc.StartPeriod, 0)
	}
	return pr
}

// Down deletes the project's namespace and waits until it is gone; a namespace that stays
// Terminating is reported with its finalizers and conditions.
func (b *Backend) Down(ctx context.Context, project string, opts backend.DownOptions) (backend.Removed, error) {
	var rm backend.Removed
	pods, err := b.cs.CoreV1().Pods(project).List(ctx, listOpts(labels.ManagedFilter))
	node := ""
	if err == nil {
		rm.Containers = len(pods.Items)
		rm.Volumes = localVolumes(pods.Items)
		for _, pod := range pods.Items {
			if pod.Labels[colocateLabel] == "true" && pod.Spec.NodeName != "" {
				node = pod.Spec.NodeName
			}
		}
	}
	if claims, err := b.cs.CoreV1().PersistentVolumeClaims(project).List(ctx, listOpts(labels.ManagedFilter)); err == nil {
		rm.Volumes += len(claims.Items)
	}
	grace := int64(1)
	if opts.Grace < 0 {
		grace = 0
	} else if opts.Grace > 0 {
		grace = int64(math.Ceil(opts.Grace.Seconds()))
	}
	// The shared volumes' directory on the node goes first, while the namespace is there to
	// run the pod that removes it; a failure is reported, and the namespace goes all the same.
	var dirErr error
	if ns, err := b.cs.CoreV1().Namespaces().Get(ctx, project, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil && ns.Annotations[annotationVolumeDir] != "" {
		dirErr = b.removeVolumeDir(ctx, ns, node, grace)
	}
	err = b.cs.CoreV1().Namespaces().Delete(ctx, project, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if apierrors.IsNotFound(err) {
		return rm, dirErr
	}
	if err != nil {
		return rm, errors.Join(dirErr, fmt.Errorf("kubernetes down %s: delete namespace: %w", project, err))
	}
	// The pods go first with the grace given, so that a namespace's slow teardown does not
	// keep the sample's processes running.
	_ = b.cs.CoreV1().Pods(project).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, listOpts(""))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := b.waitNamespaceGone(wctx, project); err != nil {
		return rm, errors.Join(dirErr, err)
	}
	rm.Networks = 1
	return rm, dirErr
}

// localVolumes counts the named volumes the pods mount that are no claims: emptyDirs and
// directories on the node (volumes.go names both "volume-<key>").
func localVolumes(pods []corev1.Pod) int {
	seen := map[string]bool{}
	for _, pod := range pods {
		for _, v := range pod.Spec.Volumes {
			if strings.HasPrefix(v.Name, "volume-") && v.PersistentVolumeClaim == nil {
				key := v.Name
				if v.EmptyDir != nil {
					key = pod.Name + "/" + v.Name // each pod's own
				}
				seen[key] = true
			}
		}
	}
	return len(seen)
}

// waitNamespaceGone watches the namespace until it is deleted.
func (b *Backend) waitNamespaceGone(ctx context.Context, ns string) error {
	for {
		cur, err := b.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubernetes down %s: %w", ns, err)
		}
		w, err := b.cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ns, ResourceVersion: cur.ResourceVersion})
		if err != nil {
			return fmt.Errorf("kubernetes down %s: %w", ns, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == "DELETED" {
				w.Stop()
				return nil
			}
			if n, ok := ev.Object.(*corev1.Namespace); ok {
				cur = n
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			var why []string
			for _, f := range cur.Spec.Finalizers {
				why = append(why, string(f))
			}
			for _, c := range cur.Status.Conditions {
				if c.Status == corev1.ConditionTrue {
					why = append(why, string(c.Type)+": "+c.Message)
				}
			}
			return errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("kubernetes down %s: namespace still %s; finalizers and conditions: %s", ns, cur.Status.Phase, strings.Join(why, "; ")))
		}
	}
}

func listOpts(selector string) metav1.ListOptions { return metav1.ListOptions{LabelSelector: selector} }
