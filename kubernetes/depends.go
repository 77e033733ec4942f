package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator/backend"
)

// A sample starts in dependency waves: a wave is every service whose dependencies are all in
// earlier waves. The pods are created wave by wave without waiting, each dependent held back
// by its start gate (gate.go), and each service's command starts only once the services it
// depends on meet the conditions it asks for (compose's depends_on). The waits follow the
// namespace's pods through an informer, never by polling, and a dependency that will never
// meet its condition stops the sample with the same *lifecycle.NotReadyError the Docker
// backend gives, naming it.

// conditionAddressed is met by a pod that has its address (or has run already): what a wave
// needs of its dependencies to be created.
const conditionAddressed = "composebox_addressed"

// conditionReady is Wait's condition: running and, with a healthcheck, healthy; a one-shot
// service that exited 0 is done. It is service_healthy's too.
const conditionReady = "ready"

// dependencyWaves groups the services into waves, dependencies first; each wave is sorted.
// Dependencies outside the project (an optional one whose profile is off) are left out.
func dependencyWaves(p *types.Project) ([][]string, error) {
	level := map[string]int{}
	const visiting = -1
	var visit func(string) (int, error)
	visit = func(n string) (int, error) {
		switch l, ok := level[n]; {
		case ok && l == visiting:
			return 0, errdefs.New(errdefs.ErrInvalidConfig, "dependency cycle through service "+n)
		case ok:
			return l, nil
		}
		level[n] = visiting
		l := 0
		for _, dep := range slices.Sorted(maps.Keys(p.Services[n].DependsOn)) {
			if _, ok := p.Services[dep]; !ok {
				continue
			}
			dl, err := visit(dep)
			if err != nil {
				return 0, err
			}
			l = max(l, dl+1)
		}
		level[n] = l
		return l, nil
	}
	var waves [][]string
	for _, n := range slices.Sorted(maps.Keys(p.Services)) {
		l, err := visit(n)
		if err != nil {
			return nil, err
		}
		for len(waves) <= l {
			waves = append(waves, nil)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(p.Services)) {
		waves[level[n]] = append(waves[level[n]], n)
	}
	return waves, nil
}

// conditionRank orders conditions from the weakest: a dependency several services of a wave
// name is awaited by the strictest of their conditions.
func conditionRank(c string) int {
	switch c {
	case types.ServiceConditionCompletedSuccessfully:
		return 3
	case types.ServiceConditionHealthy, conditionReady:
		return 2
	case types.ServiceConditionStarted:
		return 1
	}
	return 0
}

// waveNeeds maps each dependency of the wave's services to the condition it must meet first.
func waveNeeds(p *types.Project, wave []string) map[string]string {
	need := map[string]string{}
	for _, name := range wave {
		for dep, d := range p.Services[name].DependsOn {
			if _, ok := p.Services[dep]; !ok {
				continue
			}
			c := d.Condition
			if c == "" {
				c = types.ServiceConditionStarted
			}
			if conditionRank(c) > conditionRank(need[dep]) {
				need[dep] = c
			}
		}
	}
	return need
}

// meets says whether a service's pod meets cond, and why it never will ("" while it may).
func meets(pod *corev1.Pod, cond string, health bool) (backend.ServiceState, bool, string) {
	st, reason := podState(pod, health)
	switch cond {
	case conditionAddressed:
		if pod.Status.PodIP != "" || st.State == "exited" {
			return st, true, ""
		}
		return st, false, reason
	case types.ServiceConditionStarted:
		// Started is all compose asks: a container that ran and exited already counts.
		if st.State == backend.StateRunning || st.State == "exited" {
			return st, true, ""
		}
		return st, false, reason
	case types.ServiceConditionCompletedSuccessfully:
		if st.State == "exited" && st.ExitCode == 0 {
			return st, true, ""
		}
		if st.State == "exited" {
			// Even where the pod would restart it: the condition failed with the first exit.
			return st, false, fmt.Sprintf("exited with code %d", st.ExitCode)
		}
		return st, false, reason
	}
	return st, st.Ready && reason == "", reason
}

// podWatch follows a namespace's pods through an informer: a consistent view of every
// service's pod, and a signal at each change. A second informer follows the readiness probes'
// failures (the kubelet's Unhealthy events), which the pod's status does not count.
type podWatch struct {
	ns     string
	mu     sync.Mutex
	pods   map[string]*corev1.Pod           // by service
	probes map[string]map[string]probeEvent // by pod, then event
	// passed are the pods (by UID) whose healthcheck composebox's own probe saw pass
	// (healthProbe).
	passed  map[string]bool
	changed chan struct{}
	stop    chan struct{}
	once    sync.Once
}

// probeEvent is one (aggregated) Unhealthy event: how many failures it counts, and the last
// one's message.
type probeEvent struct {
	count   int
	message string
	last    time.Time
}

// watchPods starts the informers on ns's composebox pods and probe failures, and waits for
// their first lists.
func (b *Backend) watchPods(ctx context.Context, ns string) (*podWatch, error) {
	w := &podWatch{ns: ns, pods: map[string]*corev1.Pod{}, probes: map[string]map[string]probeEvent{}, passed: map[string]bool{},
		changed: make(chan struct{}), stop: make(chan struct{})}
	setPod := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		svc := pod.Annotations[labels.ComposeServiceLabel]
		w.mu.Lock()
		defer w.mu.Unlock()
		if gone {
			delete(w.pods, svc)
		} else {
			w.pods[svc] = pod
		}
		w.wake()
	}
	setEvent := func(obj any) {
		ev, ok := obj.(*corev1.Event)
		if !ok || ev.InvolvedObject.Kind != "Pod" || !strings.HasPrefix(ev.Message, "Readiness probe") {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		m := w.probes[ev.InvolvedObject.Name]
		if m == nil {
			m = map[string]probeEvent{}
			w.probes[ev.InvolvedObject.Name] = m
		}
		m[string(ev.UID)] = probeEvent{count: int(max(1, ev.Count)), message: ev.Message, last: ev.LastTimestamp.Time}
		w.wake()
	}
	pods := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(b.cs.CoreV1().RESTClient(), "pods", ns, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.ComposeProjectLabel + "=" + labelValue(ns)
	}), &corev1.Pod{}, 0, cache.Indexers{})
	events := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(b.cs.CoreV1().RESTClient(), "events", ns, func(o *metav1.ListOptions) {
		o.FieldSelector = "reason=Unhealthy"
	}), &corev1.Event{}, 0, cache.Indexers{})
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  cache.ResourceEventHandlerFuncs
	}{
		{pods, cache.ResourceEventHandlerFuncs{AddFunc: func(o any) { setPod(o, false) }, UpdateFunc: func(_, o any) { setPod(o, false) }, DeleteFunc: func(o any) { setPod(o, true) }}},
		{events, cache.ResourceEventHandlerFuncs{AddFunc: setEvent, UpdateFunc: func(_, o any) { setEvent(o) }}},
	} {
		if _, err := h.inf.AddEventHandler(h.fn); err != nil {
			return nil, fmt.Errorf("kubernetes: watch pods of %s: %w", ns, err)
		}
		go h.inf.Run(w.stop)
	}
	// The reflectors retry an API server that does not answer for ever: the first lists get
	// the start timeout.
	sctx, cancel := context.WithTimeout(ctx, b.start)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), pods.HasSynced, events.HasSynced) {
		w.close()
		if ctx.Err() == nil {
			return nil, errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("kubernetes: watch pods of %s: no list within %s", ns, b.start))
		}
		return nil, fmt.Errorf("kubernetes: watch pods of %s: %w", ns, ctx.Err())
	}
	return w, nil
}

// probeFailures is how many times pod's readiness probe failed, and the last failure's
// output.
func (w *podWatch) probeFailures(pod string) (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, msg, last := 0, "", time.Time{}
	for _, e := range w.probes[pod] {
		n += e.count
		if !e.last.Before(last) {
			msg, last = e.message, e.last
		}
	}
	return n, msg
}

func (w *podWatch) close() { w.once.Do(func() { close(w.stop) }) }

// pass records that the healthcheck of the pod with UID pod passed, and wakes the waiters.
func (w *podWatch) pass(pod string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.passed[pod] = true
	w.wake()
}

// wake wakes the waiters; the caller holds w.mu.
func (w *podWatch) wake() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// hasPassed says whether composebox's own probe saw the healthcheck of the pod with UID pod
// pass.
func (w *podWatch) hasPassed(pod string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.passed[pod]
}

// A healthcheck is the pod's readiness probe, which the kubelet runs every interval (30 s
// unless the file says otherwise). The kubelet can miss the run it triggers as the container
// starts (it reads the pod's status from before the start), and a healthy service then stays
// unready for a whole interval: one sample in six on the test cluster. So, as the Docker
// backend does, composebox runs the healthcheck's command itself while it waits for a
// service to be healthy: at once, then backing off from probeFirstBackoff to 2 s (or the
// interval, if shorter); its first pass makes the service healthy. The kubelet's probe still
// decides that a service is unhealthy, and keeps the pod's condition for the cluster.
const probeFirstBackoff = 100 * time.Millisecond

// healthProbe runs pod's healthcheck until it passes once or ctx ends.
func (b *Backend) healthProbe(ctx context.Context, w *podWatch, pod *corev1.Pod) {
	pr := pod.Spec.Containers[0].ReadinessProbe
	if pr == nil || pr.Exec == nil {
		return
	}
	t := backend.Target{Container: pod.Namespace + "/" + pod.Name, Service: pod.Annotations[labels.ComposeServiceLabel]}
	req := backend.ExecRequest{Cmd: pr.Exec.Command, Timeout: time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second, OutputLimit: 4 << 10}
	longest := min(time.Duration(max(pr.PeriodSeconds, 1))*time.Second, 2*time.Second)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for backoff := probeFirstBackoff; ; backoff = min(2*backoff, longest) {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// A probe under way runs to its end (the healthcheck's timeout bounds it) when the wait
		// ends: cancelling its stream would only leave the command behind in the container.
		if res, err := b.Exec(context.WithoutCancel(ctx), t, req); err == nil && res.ExitCode == 0 {
			w.pass(string(pod.UID))
			return
		}
		timer.Reset(backoff)
	}
}

// view is the current pods by service, and a channel closed at the next change.
func (w *podWatch) view() (map[string]*corev1.Pod, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.pods), w.changed
}

// until calls check with every new view until it reports done or fails, or ctx ends.
func (w *podWatch) until(ctx context.Context, check func(map[string]*corev1.Pod) (bool, error)) error {
	for {
		pods, changed := w.view()
		if done, err := check(pods); done || err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// await waits until every service of conds meets its condition. A service that never will
// fails the wait at once; the budget running out is a timeout. Either is a
// *lifecycle.NotReadyError naming the services concerned, as on Docker (a pod that cannot be
// scheduled or whose image cannot be pulled keeps its own typed error, with its events).
func (b *Backend) await(ctx context.Context, w *podWatch, p *types.Project, conds map[string]string, opts backend.WaitOptions) ([]backend.ServiceState, error) {
	start := time.Now()
	services := slices.Sorted(maps.Keys(conds))
	budget := b.budget(p, services, opts)
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	states := map[string]backend.ServiceState{}
	met := map[string]bool{}
	var failed error
	probing := map[string]bool{} // by pod UID
	err := w.until(wctx, func(pods map[string]*corev1.Pod) (bool, error) {
		all := true
		for _, svc := range services {
			pod, ok := pods[svc]
			if !ok {
				states[svc] = backend.ServiceState{Service: svc, State: "missing"}
				all = false
				continue
			}
			st, ok, why := meets(pod, conds[svc], p.Services[svc].HealthCheck != nil)
			// A running service whose healthcheck has not passed yet, where healthy is asked.
			starting := !ok && why == "" && st.State == backend.StateRunning && st.Health != "" && conditionRank(conds[svc]) == conditionRank(conditionReady)
			if starting && w.hasPassed(string(pod.UID)) {
				st.Health, st.Ready, ok, starting = "healthy", true, true, false
			}
			if starting && !probing[string(pod.UID)] {
				probing[string(pod.UID)] = true
				go b.healthProbe(wctx, w, pod)
			}
			if starting {
				// Docker calls a service unhealthy after its healthcheck's retries in a row
				// failed; a pod never ready yet has had nothing but failures.
				if n, msg := w.probeFailures(pod.Name); n >= probeThreshold(pod) {
					st.Health = backend.HealthUnhealthy
					why = "unhealthy: " + msg
				}
			}
			states[svc] = st
			modes.Store(st.ContainerID, modeOf(pod.Annotations))
			if why != "" {
				failed = b.notMet(context.WithoutCancel(ctx), p.Name, pod, st, why, start, budget)
				return false, failed
			}
			if ok && !met[svc] {
				met[svc] = true
				if opts.OnReady != nil && conds[svc] != conditionAddressed {
					opts.OnReady(st)
				}
			}
			all = all && ok
		}
		return all, nil
	})
	out := b.result(services, states)
	switch {
	case failed != nil:
		return out, failed
	case err != nil && ctx.Err() != nil:
		return out, fmt.Errorf("kubernetes wait %s: %w", p.Name, ctx.Err())
	case err != nil:
		var late []backend.ServiceState
		for _, svc := range services {
			if !met[svc] {
				late = append(late, states[svc])
			}
		}
		return out, b.notReadyError(context.WithoutCancel(ctx), p.Name, "timeout", start, budget, late, "")
	}
	return out, nil
}

// notMet is the error for a service whose pod will never meet its condition.
func (b *Backend) notMet(ctx context.Context, project string, pod *corev1.Pod, st backend.ServiceState, why string, start time.Time, budget time.Duration) error {
	if st.Health == backend.HealthUnhealthy {
		return b.notReadyError(ctx, project, backend.HealthUnhealthy, start, budget, []backend.ServiceState{st}, strings.TrimPrefix(why, "unhealthy: "))
	}
	if st.State != "exited" && !isCrashLoop(why) {
		return b.podFailure(ctx, pod, why)
	}
	if st.State != "exited" {
		st.State = "exited" // restarting after its exits: its last exit is what failed
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.LastTerminationState.Terminated; t != nil {
				st.ExitCode, st.OOMKilled = int(t.ExitCode), t.Reason == "OOMKilled"
			}
		}
	}
	return b.notReadyError(ctx, project, "exited", start, budget, []backend.ServiceState{st}, "")
}

// probeThreshold is how many readiness failures in a row make the pod's service unhealthy.
func probeThreshold(pod *corev1.Pod) int {
	if pr := pod.Spec.Containers[0].ReadinessProbe; pr != nil && pr.FailureThreshold > 0 {
		return int(pr.FailureThreshold)
	}
	return 3
}

func isCrashLoop(why string) bool { return strings.HasPrefix(why, "CrashLoopBackOff") }

// notReadyError is lifecycle's error, each service with its pod's last log lines (and, for
// an unhealthy one, its last probe's output).
func (b *Backend) notReadyError(ctx context.Context, project, reason string, start time.Time, budget time.Duration, states []backend.ServiceState, probe string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nr := &lifecycle.NotReadyError{Project: project, Reason: reason, Waited: time.Since(start), Budget: budget}
	for _, s := range states {
		if s.State == backend.StateRunning && s.Health == "" && reason == "timeout" {
			continue // running without a healthcheck: fine, merely not confirmed yet
		}
		ls := lifecycle.ServiceState{Service: s.Service, ContainerID: s.ContainerID, Container: s.Container, State: s.State,
			Health: s.Health, ExitCode: s.ExitCode, OOMKilled: s.OOMKilled, WorkingDir: s.WorkingDir, User: s.User}
		if s.Health == backend.HealthUnhealthy {
			ls.HealthOutput = strings.TrimPrefix(strings.TrimPrefix(probe, "Readiness probe failed:"), " ")
		}
		if s.ContainerID != "" {
			if ns, pod, err := splitID(s.ContainerID); err == nil {
				ls.Logs = b.logTail(ctx, ns, pod)
			}
		}
		nr.Services = append(nr.Services, ls)
	}
	return nr
}

// startWaves creates the project's pods wave by wave, the services of a wave in parallel
// (once the dependencies whose names they get as hostAliases have addresses); each gated
// service is released once the dependencies it names meet their conditions. It returns once
// every service is started.
func (b *Backend) startWaves(ctx context.Context, p *types.Project, opts backend.UpOptions) error {
	waves, err := dependencyWaves(p)
	if err != nil {
		return fmt.Errorf("kubernetes up %s: %w", p.Name, err)
	}
	w, err := b.watchPods(ctx, p.Name)
	if err != nil {
		return err
	}
	defer w.close()
	progress := func(svc, status string) {
		if opts.OnProgress != nil {
			opts.OnProgress(svc, status)
		}
	}
	wait := opts.Wait
	if onReady := wait.OnReady; onReady != nil {
		// Several services may wait on one dependency: it is ready once.
		var seen sync.Map
		wait.OnReady = func(st backend.ServiceState) {
			if _, dup := seen.LoadOrStore(st.Service, true); !dup {
				onReady(st)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for _, wave := range waves {
			need := map[string]string{}
			for _, name := range wave {
				for _, dep := range aliasedDependencies(p, name) {
					need[dep] = conditionAddressed
				}
			}
			if len(need) > 0 {
				if _, err := b.await(gctx, w, p, need, wait); err != nil {
					return fmt.Errorf("kubernetes up %s: %w", p.Name, err)
				}
			}
			pods := make([]*corev1.Pod, len(wave))
			cg, cctx := errgroup.WithContext(gctx)
			for i, name := range wave {
				cg.Go(func() (err error) {
					pods[i], err = b.createPod(cctx, w, p, name, progress)
					return err
				})
			}
			if err := cg.Wait(); err != nil {
				return err
			}
			for i, name := range wave {
				g.Go(func() error { return b.startService(gctx, w, p, name, pods[i], wait, progress) })
			}
		}
		return nil
	})
	return g.Wait()
}

// createPod creates a service's pod, gated when it has dependencies, and the Services naming
// it.
func (b *Backend) createPod(ctx context.Context, w *podWatch, p *types.Project, name string, progress func(svc, status string)) (*corev1.Pod, error) {
	svc := p.Services[name]
	progress(name, "creating")
	pod, err := b.podFor(ctx, p, svc)
	if err != nil {
		return nil, err
	}
	pods, _ := w.view()
	pod.Spec.HostAliases = append(pod.Spec.HostAliases, hostAliases(p, name, pods)...)
	if needsGate(p, name) {
		base, err := b.BaseImage(ctx)
		if err != nil {
			return nil, err
		}
		ref, err := b.registryRef(base)
		if err != nil {
			return nil, err
		}
		// Last, so that the binds are delivered while the dependencies start.
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, gate(p, name, ref))
	}
	if _, err := b.cs.CoreV1().Pods(p.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kubernetes up %s: create pod %s: %w", p.Name, pod.Name, err)
	}
	progress(name, "created")
	for _, host := range hostNames(name, svc) {
		if err := b.createService(ctx, p.Name, host, name); err != nil {
			return nil, err
		}
	}
	return pod, nil
}

// startService hands a created pod the host files it binds and, once the services it depends
// on meet their conditions, releases its gate: its container starts only then.
func (b *Backend) startService(ctx context.Context, w *podWatch, p *types.Project, name string, pod *corev1.Pod, wait backend.WaitOptions, progress func(svc, status string)) error {
	if err := b.deliverBinds(ctx, w, p, p.Services[name], pod); err != nil {
		return err
	}
	if needsGate(p, name) {
		if _, err := b.await(ctx, w, p, waveNeeds(p, []string{name}), wait); err != nil {
			return fmt.Errorf("kubernetes up %s: %w", p.Name, err)
		}
		progress(name, "starting")
		if err := b.release(ctx, w, p, name, pod); err != nil {
			return err
		}
	} else {
		progress(name, "starting")
	}
	progress(name, "started")
	return nil
}
