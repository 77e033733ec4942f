package kubernetes

import (
	"context"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// A pod's container dies as a Docker container does (its process is killed, or exits), or
// the pod is deleted under it. Both make the sample unavailable: execs and file operations
// fail with ErrUnavailable and the diagnosis, and the death watch reports it.

// statusLag bounds how long the pod's status may take to show a death an exec already saw:
// the kubelet notices a container's exit at its next relist (about a second) and then posts
// it.
const statusLag = 10 * time.Second

// running reports a pod whose container runs and which nobody is deleting.
func running(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

// ended reports a pod that will not run again: deleted, being deleted, or its container
// terminated under a restart policy that does not restart it.
func ended(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return pod.Spec.RestartPolicy == corev1.RestartPolicyNever ||
				pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && t.ExitCode == 0
		}
	}
	return false
}

// unavailable is ErrUnavailable for what in t's container, with the container's diagnosis.
func (b *Backend) unavailable(ctx context.Context, t backend.Target, what string, cause error) error {
	b.dead.Store(t.Container, true)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	d, err := b.Diagnose(dctx, t)
	msg := what + ": " + d.String()
	if err != nil {
		msg = what + ": container " + t.Container + " unavailable (diagnostics failed: " + err.Error() + ")"
	}
	if cause == nil {
		return errdefs.New(errdefs.ErrUnavailable, msg)
	}
	return errdefs.Wrap(errdefs.ErrUnavailable, cause, msg)
}

// dead is ErrUnavailable, with the diagnosis, when t's container no longer runs, and nil when
// it does. A new exec into a dead container fails at once, while its pod's status says so only
// later: once the exec has failed, the status is awaited so that the diagnosis tells how the
// container ended.
func (b *Backend) checkDead(ctx context.Context, t backend.Target, what string, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusLag+5*time.Second)
	defer cancel()
	if code, err := b.stream(dctx, t.Container, []string{"sh", "-c", "exit 0"}, nil, io.Discard, io.Discard, false, nil); err == nil && code == 0 {
		return nil
	}
	if !b.waitStopped(dctx, t.Container) {
		return nil
	}
	return b.unavailable(ctx, t, what, cause)
}

// waitStopped watches id's pod until its container no longer runs or the pod is gone, for up
// to statusLag; it reports whether it stopped.
func (b *Backend) waitStopped(ctx context.Context, id string) bool {
	ns, name, err := splitID(id)
	if err != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, statusLag)
	defer cancel()
	for {
		pod, err := b.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true
		}
		if err != nil {
			return false
		}
		if !running(pod) {
			return true
		}
		w, err := b.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: pod.ResourceVersion})
		if err != nil {
			return false
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ev.Type == watch.Deleted || ok && !running(p) {
				w.Stop()
				return true
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return false
		}
	}
}

// WatchDeaths watches the selected pods in every namespace and reports each that ends: its
// container killed or exited for good, or the pod deleted. The first listing replays the
// deaths since opts.Since of the pods that still exist; a pod deleted while no watch ran is
// not replayed (the pool checks its samples itself whenever a watch starts).
func (b *Backend) WatchDeaths(ctx context.Context, opts backend.WatchOptions) (<-chan backend.Death, <-chan error) {
	deaths, errs := make(chan backend.Death), make(chan error, 1)
	go func() {
		defer close(deaths)
		errs <- b.watchDeaths(ctx, opts, deaths)
	}()
	return deaths, errs
}

func (b *Backend) watchDeaths(ctx context.Context, opts backend.WatchOptions, deaths chan<- backend.Death) error {
	sel := selector(opts.Labels)
	list, err := b.cs.CoreV1().Pods("").List(ctx, listOpts(sel))
	if err != nil {
		return err
	}
	reported := map[types.UID]bool{}
	send := func(pod *corev1.Pod) error {
		if reported[pod.UID] {
			return nil
		}
		reported[pod.UID] = true
		project := pod.Annotations[labels.ComposeProjectLabel]
		if project == "" {
			project = pod.Namespace
		}
		select {
		case deaths <- backend.Death{Project: project, Service: pod.Annotations[labels.ComposeServiceLabel], Container: pod.Name, ContainerID: pod.Namespace + "/" + pod.Name}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if ended(pod) && endedSince(pod, opts.Since) {
			if err := send(pod); err != nil {
				return err
			}
		}
	}
	w, err := b.cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The server ends watches after a while: the caller subscribes again.
				return nil
			}
			if ev.Type == watch.Error {
				if ctx.Err() != nil {
					// The stream was cut by the cancellation, which client-go reports as an
					// error event (a short read) that can come before ctx.Done is seen.
					return ctx.Err()
				}
				return apierrors.FromObject(ev.Object)
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted || ended(pod) {
				if err := send(pod); err != nil {
					return err
				}
			}
		}
	}
}

// endedSince reports a pod that ended at or after since (a zero since: any time).
func endedSince(pod *corev1.Pod, since time.Time) bool {
	if since.IsZero() {
		return true
	}
	if pod.DeletionTimestamp != nil {
		return true
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return !t.FinishedAt.Time.Before(since.Truncate(time.Second))
		}
	}
	return false
}

// knownDead is ErrUnavailable for a container this backend has already found dead, checked
// again (it may have been restarted since); nil for any other. ExecStream needs it: its
// stream to a dead container opens before the container's state is known, so without it the
// death would show only in the process's Wait.
func (b *Backend) knownDead(ctx context.Context, t backend.Target, what string) error {
	if _, ok := b.dead.Load(t.Container); !ok {
		return nil
	}
	if err := b.checkDead(ctx, t, what, nil); err != nil {
		return err
	}
	b.dead.Delete(t.Container)
	return nil
}
