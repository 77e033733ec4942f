package kubernetes

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// failReasons are container waiting reasons that never pass on their own: the wait fails at
// once, naming it.
var failReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
	"CreateContainerError", "CreateContainerConfigError", "RunContainerError"}

// Wait waits until every service's pod is ready (a one-shot that exited 0 counts as done),
// following the pods through an informer.
func (b *Backend) Wait(ctx context.Context, p *types.Project, opts backend.WaitOptions) ([]backend.ServiceState, error) {
	w, err := b.watchPods(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	defer w.close()
	conds := map[string]string{}
	for name := range p.Services {
		conds[name] = conditionReady
	}
	start := time.Now()
	states, err := b.await(ctx, w, p, conds, opts)
	if err != nil {
		return states, err
	}
	if err := b.confirmRunning(ctx, w, p, start, b.budget(p, slices.Sorted(maps.Keys(conds)), opts)); err != nil {
		return states, err
	}
	if names := hostsOnlyNames(p); len(names) > 0 {
		// The entries /etc/hosts lacks need the pods' addresses, which their status may not
		// carry yet where composebox saw them running before the kubelet said so.
		need := map[string]string{}
		for consumer, hs := range names {
			need[consumer] = conditionAddressed
			for _, h := range hs {
				need[h.target] = conditionAddressed
			}
		}
		if _, err := b.await(ctx, w, p, need, backend.WaitOptions{Timeout: opts.Timeout}); err != nil {
			return states, err
		}
	}
	b.completeHosts(ctx, p, w)
	return states, nil
}

// budget is opts.Timeout, else the backend's start timeout plus the slowest healthcheck's
// full run.
func (b *Backend) budget(p *types.Project, services []string, opts backend.WaitOptions) time.Duration {
	if opts.Timeout > 0 {
		return opts.Timeout
	}
	d := b.start
	for _, name := range services {
		hc := p.Services[name].HealthCheck
		if hc == nil || hc.Interval == nil {
			continue
		}
		retries := uint64(3)
		if hc.Retries != nil {
			retries = *hc.Retries
		}
		run := time.Duration(*hc.Interval) * time.Duration(retries+1)
		if hc.StartPeriod != nil {
			run += time.Duration(*hc.StartPeriod)
		}
		d = max(d, b.start+run)
	}
	return d
}

func (b *Backend) result(services []string, states map[string]backend.ServiceState) []backend.ServiceState {
	out := make([]backend.ServiceState, 0, len(services))
	for _, s := range services {
		st, ok := states[s]
		if !ok {
			st = backend.ServiceState{Service: s, State: "missing"}
		}
		out = append(out, st)
	}
	return out
}

// unboundClaims is what the scheduler says of a pod whose volume claims are not bound yet:
// they are, moments later, once the volume controller (or a provisioner) has done its work,
// and the scheduler tries again then. It is a wait, not a failure.
const unboundClaims = "unbound immediate PersistentVolumeClaims"

// podState describes a pod as a service state, and names the reason it will never be ready.
func podState(pod *corev1.Pod, health bool) (backend.ServiceState, string) {
	st := backend.ServiceState{Service: pod.Annotations[labels.ComposeServiceLabel], ContainerID: pod.Namespace + "/" + pod.Name,
		Container: pod.Name, State: "created", WorkingDir: pod.Annotations[annotationWorkdir], User: pod.Annotations[annotationUser]}
	if st.WorkingDir == "" {
		st.WorkingDir = "/"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			!strings.Contains(c.Message, unboundClaims) {
			return st, "FailedScheduling: " + c.Message
		}
	}
	if pod.Status.Phase == corev1.PodFailed && len(pod.Status.ContainerStatuses) == 0 {
		// Refused by the node before any container started (a forbidden sysctl, say).
		return st, pod.Status.Reason + ": " + pod.Status.Message
	}
	for _, cs := range pod.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			if slices.Contains(failReasons, cs.State.Waiting.Reason) {
				return st, cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
			}
		case cs.State.Running != nil:
			st.State = backend.StateRunning
			if health {
				st.Health = "starting"
				if cs.Ready {
					st.Health = "healthy"
				}
			}
			st.Ready = cs.Ready
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			st.State, st.ExitCode, st.OOMKilled = "exited", int(t.ExitCode), t.Reason == "OOMKilled"
			if t.ExitCode == 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyAlways {
				st.Ready = true
				return st, ""
			}
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever || st.OOMKilled {
				return st, fmt.Sprintf("%s (exit code %d)", t.Reason, t.ExitCode)
			}
		}
	}
	return st, ""
}

// observed is podState for a pod reported on now (a list or an inspect). composebox hands a
// sample over as soon as its own probe saw the containers run (depends.go), which can be a
// relist before the kubelet reports them running; a container the kubelet still calls
// created, with nothing wrong, is looked into (runs), so that a caller who
// lists or opens the sample at once does not take it for one that never started.
func (b *Backend) observed(ctx context.Context, pod *corev1.Pod, health bool) (backend.ServiceState, string) {
	st, reason := podState(pod, health)
	if st.State != "created" || reason != "" || pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" {
		return st, reason
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if b.runs(ctx, pod) {
		st.State, st.Ready = backend.StateRunning, !health
		if health {
			st.Health = "starting"
		}
	}
	return st, reason
}

// podFailure names why a pod will never be ready, with its events and log tail.
func (b *Backend) podFailure(ctx context.Context, pod *corev1.Pod, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msg := fmt.Sprintf("service %s (pod %s/%s): %s", pod.Annotations[labels.ComposeServiceLabel], pod.Namespace, pod.Name, reason)
	if evs, err := b.cs.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod.Name).String()}); err == nil {
		var lines []string
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeNormal {
				lines = append(lines, e.Reason+": "+e.Message)
			}
		}
		if len(lines) > 0 {
			msg += "; events: " + strings.Join(lines[max(0, len(lines)-5):], "; ")
		}
	}
	if tail := b.logTail(ctx, pod.Namespace, pod.Name); tail != "" {
		msg += fmt.Sprintf("; last log lines: %q", tail)
	}
	cat := errdefs.ErrUnavailable
	if strings.HasPrefix(reason, "ErrImagePull") || strings.HasPrefix(reason, "ImagePullBackOff") || strings.HasPrefix(reason, "InvalidImageName") {
		cat = errdefs.ErrNotFound
	}
	return errdefs.New(cat, "kubernetes: "+msg)
}

func (b *Backend) logTail(ctx context.Context, ns, pod string) string {
	tail := int64(20)
	rc, err := b.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{TailLines: &tail}).Stream(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, 8<<10))
	return strings.TrimSpace(string(data))
}

// The kubelet reports a container running at its relist (once a second), so a container that
// exits a moment after it started (a service that gives up at once) can be reported running
// and ready, no healthcheck asking more, and the sample would be handed over with that
// service already dead. As the Docker backend does (a service without a healthcheck counts
// only once it is still running a while after it was first seen running), Wait looks into
// each such service's container once stableUptime has passed. One that no longer runs is
// awaited until the kubelet reports how it ended, for at most confirmExitWait (an image
// without `true` cannot be looked into, and is taken as running, as before).
const (
	stableUptime    = 250 * time.Millisecond
	confirmExitWait = 5 * time.Second
)

// confirmRunning fails the wait, with the not-ready error naming the service's exit, when a
// service without a healthcheck that the kubelet reported running has already exited.
func (b *Backend) confirmRunning(ctx context.Context, w *podWatch, p *types.Project, start time.Time, budget time.Duration) error {
	pods, _ := w.view()
	var look []*corev1.Pod
	for svc, pod := range pods {
		if st, _ := podState(pod, false); p.Services[svc].HealthCheck == nil && st.State == backend.StateRunning {
			look = append(look, pod)
		}
	}
	if len(look) == 0 {
		return nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	gone := map[string]bool{}
	for _, pod := range look {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Only the time left of stableUptime since the container started: the kubelet's
			// report comes up to a relist late, so the container has often run long enough
			// already. Its start time is in whole seconds, hence the second added.
			timer := time.NewTimer(stableWait(pod, time.Now()))
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			if !b.runs(ctx, pod) {
				mu.Lock()
				gone[pod.Annotations[labels.ComposeServiceLabel]] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("kubernetes wait %s: %w", p.Name, ctx.Err())
	}
	if len(gone) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, confirmExitWait)
	defer cancel()
	var failed error
	_ = w.until(wctx, func(pods map[string]*corev1.Pod) (bool, error) {
		for svc := range gone {
			pod := pods[svc]
			if pod == nil {
				continue
			}
			st, reason := podState(pod, false)
			if ok, why := judge(st, reason, conditionReady, pod.Status.PodIP != ""); !ok && why != "" {
				failed = b.notMet(context.WithoutCancel(ctx), p.Name, pod, st, why, start, budget)
				return true, nil
			}
		}
		return false, nil
	})
	if failed == nil && ctx.Err() != nil {
		return fmt.Errorf("kubernetes wait %s: %w", p.Name, ctx.Err())
	}
	return failed
}

// stableWait is how long to wait, at now, before an exec that finds pod's container running
// proves it ran for stableUptime: none once its reported start (truncated to the second) is
// more than a second and stableUptime ago.
func stableWait(pod *corev1.Pod, now time.Time) time.Duration {
	for _, cs := range pod.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && !r.StartedAt.IsZero() {
			return min(stableUptime, max(0, r.StartedAt.Add(time.Second+stableUptime).Sub(now)))
		}
	}
	return stableUptime
}
