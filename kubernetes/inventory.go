package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
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
// namespace/pod.
func (b *Backend) Containers(ctx context.Context, sel []string, all bool) ([]backend.Container, error) {
	list, err := b.cs.CoreV1().Pods("").List(ctx, listOpts(selector(sel)))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	var out []backend.Container
	for i := range list.Items {
		pod := &list.Items[i]
		st, _ := podState(pod, false)
		if !all && st.State != backend.StateRunning {
			continue
		}
		out = append(out, backend.Container{ID: pod.Namespace + "/" + pod.Name, Name: pod.Name, Labels: pod.Annotations,
			State: st.State, Status: string(pod.Status.Phase)})
	}
	return out, nil
}

// projects lists the composebox namespaces as projects.
func (b *Backend) projects(ctx context.Context) ([]backend.Project, error) {
	list, err := b.cs.CoreV1().Namespaces().List(ctx, listOpts(labels.ManagedFilter))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list namespaces: %w", err)
	}
	out := make([]backend.Project, 0, len(list.Items))
	for _, ns := range list.Items {
		a := ns.Annotations
		p := backend.Project{Name: ns.Name, Task: a[labels.LabelTask], Sample: a[labels.LabelSample], Owner: a[labels.LabelOwner],
			Created: ns.CreationTimestamp.Time}
		if secs, err := strconv.ParseInt(a[labels.LabelCreated], 10, 64); err == nil {
			p.Created = time.Unix(secs, 0)
		} else if t, err := time.Parse(time.RFC3339, a[labels.LabelCreated]); err == nil {
			p.Created = t
		}
		p.Stale = tracking.OwnerStatus(p.Owner) == tracking.StatusStale
		out = append(out, p)
	}
	return out, nil
}

// ListProjects lists every composebox namespace.
func (b *Backend) ListProjects(ctx context.Context) ([]backend.Project, error) {
	return b.projects(ctx)
}

// OwnedProjects names task's namespaces that owner created.
func (b *Backend) OwnedProjects(ctx context.Context, task, owner string) ([]string, error) {
	ps, err := b.projects(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		if p.Task == task && p.Owner == owner {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// Sweep deletes the namespaces sel chooses.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	ps, err := b.projects(ctx)
	if err != nil {
		return nil, err
	}
	var out []backend.SweepResult
	for _, p := range ps {
		if !chosen(sel, p) {
			continue
		}
		rm, err := b.Down(ctx, p.Name, backend.DownOptions{Grace: opts.Grace})
		out = append(out, backend.SweepResult{Project: p, Removed: rm, Err: err})
	}
	return out, nil
}

func chosen(sel backend.Selector, p backend.Project) bool {
	if len(sel.Names) > 0 {
		for _, n := range sel.Names {
			if n == p.Name {
				return true
			}
		}
		return false
	}
	if !sel.All && !(sel.Stale && p.Stale) {
		return false
	}
	if sel.Task != "" && p.Task != sel.Task {
		return false
	}
	return sel.OlderThan <= 0 || time.Since(p.Created) >= sel.OlderThan
}

// MarkDetached hands the sample over: its namespace's owner becomes "detached", which no
// owner's teardown or stale sweep selects. Unlike a container's labels, a namespace's can
// change, so no marker object is needed.
func (b *Backend) MarkDetached(ctx context.Context, m backend.Marker) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{labels.LabelOwner: labels.OwnerDetached},
		"annotations": map[string]string{labels.LabelOwner: labels.OwnerDetached},
	}})
	if err != nil {
		return err
	}
	_, err = b.cs.CoreV1().Namespaces().Patch(ctx, m.Project, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return errdefs.Wrap(errdefs.ErrNotFound, err, "kubernetes: detach "+m.Project)
	}
	return err
}

// Warm-pool markers and claims have no Kubernetes form yet.

func (b *Backend) MarkWarm(ctx context.Context, m backend.WarmMarker) error {
	return notSupported("warm pools (markers)")
}
func (b *Backend) Claim(ctx context.Context, m backend.Marker) (bool, error) {
	return false, notSupported("warm pools (claims)")
}
func (b *Backend) Take(ctx context.Context, project string) (bool, error) {
	return false, notSupported("warm pools (claims)")
}
func (b *Backend) RecordClaim(ctx context.Context, m backend.Marker) error {
	return notSupported("warm pools (claims)")
}
func (b *Backend) WarmProjects(ctx context.Context, task string) ([]backend.WarmProject, error) {
	return nil, nil
}

// WatchDeaths has no Kubernetes form yet: the stream ends at once with the error.
func (b *Backend) WatchDeaths(ctx context.Context, opts backend.WatchOptions) (<-chan backend.Death, <-chan error) {
	deaths, errs := make(chan backend.Death), make(chan error, 1)
	close(deaths)
	errs <- notSupported("death watch")
	return deaths, errs
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
	st, _ := podState(pod, pod.Spec.Containers[0].ReadinessProbe != nil)
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
	if opts.Tail > 0 {
		n := int64(opts.Tail)
		lo.TailLines = &n
	} else if opts.Tail < 0 {
		return nil
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

// ShellCommand is the kubectl command that enters the pod.
func (b *Backend) ShellCommand(name, user, shell string) string {
	ns, pod, _ := strings.Cut(name, "/")
	if pod == "" {
		return "kubectl exec -it " + name + " -- " + shell
	}
	return "kubectl exec -it -n " + ns + " " + pod + " -- " + shell
}
