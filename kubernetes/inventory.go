package kubernetes

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// selector turns "key=value" / "key" terms into a label selector, values fitted as Up fitted
// them.
func selector(sel []string) string {
	terms := make([]string, 0, len(sel))
	for _, s := range sel {
		if k, v, ok := strings.Cut(s, "="); ok {
			terms = append(terms, k+"="+labelValue(v))
		} else {
			terms = append(terms, s)
		}
	}
	return strings.Join(terms, ",")
}

// Containers lists the pods carrying sel, in every namespace; a container's id is
// namespace/pod, and its labels are the service's compose labels. With all, a service whose
// pod is gone (deleted or evicted) while its sample's namespace lives is listed too, in state
// "removed" (see removedPods).
func (b *Backend) Containers(ctx context.Context, sel []string, all bool) ([]backend.Container, error) {
	list, err := b.cs.CoreV1().Pods("").List(ctx, listOpts(selector(sel)))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	var out []backend.Container
	if all {
		if out, err = b.removedPods(ctx, sel, list.Items); err != nil {
			return nil, err
		}
	}
	for i := range list.Items {
		pod := &list.Items[i]
		st, _ := podState(pod, false)
		if !all && st.State != backend.StateRunning {
			// Only the running ones are asked for, and one the kubelet still calls created
			// may run already; the others (Open, ps, logs) inspect each container anyway.
			if st, _ = b.observed(ctx, pod, false); st.State != backend.StateRunning {
				continue
			}
		}
		modes.Store(pod.Namespace+"/"+pod.Name, modeOf(pod.Annotations))
		out = append(out, backend.Container{ID: pod.Namespace + "/" + pod.Name, Name: pod.Name, Labels: podLabels(pod.Annotations),
			State: st.State, Status: string(pod.Status.Phase)})
	}
	return out, nil
}

// stateRemoved is the state of a service whose pod no longer exists.
const stateRemoved = "removed"

// removedPods are the services of the samples sel chooses whose pods are gone, found from the
// headless Services that name them (they live as long as the namespace). A pod deleted under
// a sample is how a service dies on a cluster (an eviction, a person, a node lost), so the
// sample is unavailable, as one whose container was killed is on Docker, and not unknown:
// Open then says which service is gone rather than that there is no such sample.
func (b *Backend) removedPods(ctx context.Context, sel []string, pods []corev1.Pod) ([]backend.Container, error) {
	list, err := b.cs.CoreV1().Services("").List(ctx, listOpts(selector(sel)))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list services: %w", err)
	}
	seen := map[string]bool{}
	for _, pod := range pods {
		seen[pod.Namespace+"/"+pod.Name] = true
	}
	var out []backend.Container
	for _, svc := range list.Items {
		service := svc.Spec.Selector[labels.ComposeServiceLabel]
		name := svc.Annotations[annotationPod]
		if name == "" {
			name = dnsName(service) // a Service made before it carried the pod's name
		}
		if service == "" || name == "" || seen[svc.Namespace+"/"+name] {
			continue
		}
		seen[svc.Namespace+"/"+name] = true
		lbl := podLabels(svc.Annotations)
		if len(lbl) == 0 {
			lbl = map[string]string{labels.LabelManaged: "true", labels.ComposeProjectLabel: svc.Namespace, labels.ComposeServiceLabel: service}
		}
		out = append(out, backend.Container{ID: svc.Namespace + "/" + name, Name: name, Labels: lbl, State: stateRemoved, Status: stateRemoved})
	}
	return out, nil
}

// Annotations of a namespace beyond its composebox labels: who claimed it from a warm pool.
const annotationClaimer = annotationPrefix + "claimer"

// projects lists the composebox namespaces as projects, with their pods counted as Wait saw
// them: Wait hands a sample over once composebox's own probe saw its containers run, which
// can be seconds before the kubelet posts them running, so a pod whose status still says
// created is looked into (observed), as Containers does, and a listing made once Up and Wait
// have returned counts what they reported.
func (b *Backend) projects(ctx context.Context) ([]backend.Project, error) {
	list, err := b.cs.CoreV1().Namespaces().List(ctx, listOpts(labels.ManagedFilter))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list namespaces: %w", err)
	}
	pods, err := b.cs.CoreV1().Pods("").List(ctx, listOpts(labels.ManagedFilter))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	byNS := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		byNS[pod.Namespace] = append(byNS[pod.Namespace], pod)
	}
	seen := b.lookInto(ctx, pods.Items)
	status := backend.OwnerStatuses()
	out := make([]backend.Project, 0, len(list.Items))
	for _, ns := range list.Items {
		a := ns.Annotations
		if a[labels.ComposeProjectLabel] == "" {
			continue // composebox-labelled, but no sample's (a test's service account, say)
		}
		out = append(out, summary(ns.Name, a, ns.Labels[labels.LabelPool], ns.CreationTimestamp.Time, byNS[ns.Name], seen).Project(status))
	}
	backend.SortProjects(out)
	return out, nil
}

// summary is a namespace's sample as backend.Summary sums it up: its annotations carry the
// sample's labels, the namespace is its network, and who claimed it from a pool is an owner
// beside the one that started it. seen are the pods the kubelet still calls created that were
// seen running, with the health to list (lookInto).
func summary(name string, a map[string]string, pool string, created time.Time, pods []*corev1.Pod, seen map[types.UID]string) *backend.Summary {
	s := backend.NewSummary(name)
	s.Labels(a, created)
	if a[labels.LabelOwner] == labels.OwnerDetached {
		s.Detached()
	}
	s.Owner(a[annotationClaimer])
	s.Network(1)
	s.Pool(pool)
	for _, pod := range pods {
		st, _ := podState(pod, pod.Spec.Containers[0].ReadinessProbe != nil)
		if health, ok := seen[pod.UID]; ok && st.State == "created" {
			st.State, st.Health = backend.StateRunning, health
		}
		s.Container(backend.SummaryContainer{Name: pod.Name, Service: st.Service, State: st.State, Health: st.Health,
			ExitCode: st.ExitCode, ExitKnown: true, Config: pod.Annotations[labels.ComposeConfigFilesLabel]})
	}
	return s
}

// lookInto looks into each pod of pods whose status says created, with nothing wrong, a few at
// a time, and returns those whose container runs, with the health to list ("starting" for one
// with a healthcheck, else "").
func (b *Backend) lookInto(ctx context.Context, pods []corev1.Pod) map[types.UID]string {
	var mu sync.Mutex
	seen := map[types.UID]string{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range pods {
		pod := &pods[i]
		hc := pod.Spec.Containers[0].ReadinessProbe != nil
		if st, _ := podState(pod, hc); st.State != "created" {
			continue
		}
		g.Go(func() error {
			if st, _ := b.observed(gctx, pod, hc); st.State == backend.StateRunning {
				mu.Lock()
				seen[pod.UID] = st.Health
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return seen
}

// ownersStatus is a project's owner status from its owner and the claimer that took it from a
// pool, as backend.Summary tells it: detached, alive when either lives, unknown when neither
// can be told, else stale.
func ownersStatus(owner, claimer string, status func(string) backend.OwnerStatus) backend.OwnerStatus {
	return summary("", map[string]string{labels.LabelOwner: owner, annotationClaimer: claimer}, "", time.Time{}, nil, nil).Project(status).Status
}

// ListProjects lists every composebox namespace.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	return b.projects(ctx)
}

// OwnedProjects names task's namespaces that owner created or claimed from a pool, detached
// ones left out.
func (b *Backend) OwnedProjects(ctx context.Context, task, owner string) ([]string, error) {
	list, err := b.cs.CoreV1().Namespaces().List(ctx, listOpts(labels.ManagedFilter+","+labels.LabelTask+"="+labelValue(task)))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list namespaces: %w", err)
	}
	var out []string
	for _, ns := range list.Items {
		a := ns.Annotations
		if a[labels.LabelTask] == task && a[labels.LabelOwner] != labels.OwnerDetached && (a[labels.LabelOwner] == owner || a[annotationClaimer] == owner) {
			out = append(out, ns.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Sweep deletes the namespaces sel chooses (with DryRun, only says which): backend.Sweep,
// the selection and sweep every backend shares.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	return backend.Sweep(ctx, b, sel, opts)
}

// splitID splits a container id, namespace/pod.
func splitID(id string) (ns, pod string, err error) {
	ns, pod, ok := strings.Cut(id, "/")
	if !ok {
		return "", "", errdefs.New(errdefs.ErrNotFound, "kubernetes: container "+id+": not a namespace/pod id")
	}
	return ns, pod, nil
}

func (b *Backend) pod(ctx context.Context, id string) (*corev1.Pod, error) {
	ns, name, err := splitID(id)
	if err != nil {
		return nil, err
	}
	pod, err := b.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errdefs.Wrap(errdefs.ErrNotFound, err, "kubernetes: pod "+id)
	}
	return pod, err
}

// Inspect describes a service's pod.
func (b *Backend) Inspect(ctx context.Context, container string) (backend.ContainerInfo, error) {
	pod, err := b.pod(ctx, container)
	if err != nil {
		return backend.ContainerInfo{}, err
	}
	st, _ := b.observed(ctx, pod, pod.Spec.Containers[0].ReadinessProbe != nil)
	modes.Store(container, modeOf(pod.Annotations))
	return backend.ContainerInfo{ID: container, Name: pod.Name, State: st.State, Running: st.State == backend.StateRunning,
		Health: st.Health, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, WorkingDir: st.WorkingDir, User: st.User,
		TTY: pod.Spec.Containers[0].TTY}, nil
}

// Diagnose explains a pod that cannot run anything.
func (b *Backend) Diagnose(ctx context.Context, t backend.Target) (backend.Diagnosis, error) {
	pod, err := b.pod(ctx, t.Container)
	if errdefs.Kind(err) == "not_found" {
		return backend.Diagnosis{Container: t.Container, Missing: true}, nil
	}
	if err != nil {
		return backend.Diagnosis{}, err
	}
	st, reason := podState(pod, false)
	if pod.DeletionTimestamp != nil && st.State == backend.StateRunning {
		st.State = "removing"
	}
	d := backend.Diagnosis{Container: t.Container, Name: pod.Name, Status: st.State, Running: st.State == backend.StateRunning,
		ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, Error: reason}
	d.LogTail = b.logTail(ctx, pod.Namespace, pod.Name)
	return d, nil
}

// Logs streams a pod's output (stdout and stderr come as one stream on Kubernetes: it all
// goes to Stdout).
func (b *Backend) Logs(ctx context.Context, container string, opts backend.LogsOptions) error {
	ns, name, err := splitID(container)
	if err != nil {
		return err
	}
	lo := &corev1.PodLogOptions{Follow: opts.Follow, Timestamps: opts.Timestamps}
	switch {
	case opts.Tail > 0:
		n := int64(opts.Tail)
		lo.TailLines = &n
	case opts.Tail < 0 && !opts.Follow:
		return nil // no line of the past, and nothing to wait for
	case opts.Tail < 0:
		// None of the past: only what comes from now on.
		lo.TailLines = new(int64)
	}
	if !opts.Since.IsZero() {
		t := metav1.NewTime(opts.Since)
		lo.SinceTime = &t
	}
	rc, err := b.cs.CoreV1().Pods(ns).GetLogs(name, lo).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return errdefs.Wrap(errdefs.ErrNotFound, err, "kubernetes: pod "+container)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	w := opts.Stdout
	if w == nil {
		w = io.Discard
	}
	_, err = io.Copy(w, rc)
	return err
}

// ShellCommand is the kubectl command that enters the pod (its id is namespace/pod).
func (b *Backend) ShellCommand(c backend.ContainerInfo, user, shell string) string {
	ns, pod, err := splitID(c.ID)
	if err != nil {
		return "kubectl exec -it " + c.Name + " -- " + shell
	}
	return "kubectl exec -it -n " + ns + " " + pod + " -- " + shell
}
