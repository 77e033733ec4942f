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
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// A sample starts in dependency waves: a wave is every service whose dependencies are all in
// earlier waves. The pods are created wave by wave without waiting, each dependent held back
// by its start gate (gate.go), and each service's command starts only once the services it
// depends on meet the conditions it asks for (compose's depends_on). The waits follow the
// namespace's pods through an informer, never by polling, and a dependency that will never
// meet its condition stops the sample with the same *backend.NotReadyError the Docker
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

// judge says whether a service in state st (with reason, podState's; addressed if its pod
// has an IP) meets cond, and why it never will ("" while it may).
func judge(st backend.ServiceState, reason, cond string, addressed bool) (bool, string) {
	switch cond {
	case conditionAddressed:
		if addressed || st.State == "exited" {
			return true, ""
		}
		return false, reason
	case types.ServiceConditionStarted:
		// Started is all compose asks: a container that ran and exited already counts.
		if st.State == backend.StateRunning || st.State == "exited" {
			return true, ""
		}
		return false, reason
	case types.ServiceConditionCompletedSuccessfully:
		if st.State == "exited" && st.ExitCode == 0 {
			return true, ""
		}
		if st.State == "exited" {
			// Even where the pod would restart it: the condition failed with the first exit.
			return false, fmt.Sprintf("exited with code %d", st.ExitCode)
		}
		return false, reason
	}
	return st.Ready && reason == "", reason
}

// podWatch follows a namespace's pods through an informer: a consistent view of every
// service's pod, and a signal at each change. A second informer follows the readiness probes'
// failures (the kubelet's Unhealthy events), which the pod's status does not count.
type podWatch struct {
	ns     string
	mu     sync.Mutex
	pods   map[string]*corev1.Pod           // by service
	probes map[string]map[string]probeEvent // by pod, then event
	// seen is what composebox's own probes saw of each pod (by UID) before its status may say
	// so (probe).
	seen map[string]sight
	// held are the services whose container cannot start yet: the host files they bind are on
	// their way, or their start gate is closed. They are not probed.
	held map[string]bool
	// probing are the probes under way, by pod UID and whether they run the healthcheck.
	probing map[probeKey]bool
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
	w := &podWatch{ns: ns, pods: map[string]*corev1.Pod{}, probes: map[string]map[string]probeEvent{}, seen: map[string]sight{}, held: map[string]bool{}, probing: map[probeKey]bool{},
		changed: make(chan struct{}), stop: make(chan struct{})}
	setPod := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Labels[gatewayLabel] != "" {
			return // an egress gateway is no service of the project (Up waits for it itself)
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

// sight is what a probe of composebox's own saw of a pod's container.
type sight int

const (
	sightNothing sight = iota
	sightRunning       // an exec ran in it
	sightHealthy       // its healthcheck passed
)

// see records what a probe saw of the pod with UID pod, and wakes the waiters.
func (w *podWatch) see(pod string, s sight) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s > w.seen[pod] {
		w.seen[pod] = s
		w.wake()
	}
}

// wake wakes the waiters; the caller holds w.mu.
func (w *podWatch) wake() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// sight is what composebox's own probes saw of the pod with UID pod.
func (w *podWatch) sight(pod string) sight {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[pod]
}

// hold marks a service's container as unable to start yet, or (held false) free to.
func (w *podWatch) hold(svc string, held bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if held {
		w.held[svc] = true
		return
	}
	delete(w.held, svc)
	w.wake()
}

func (w *podWatch) isHeld(svc string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held[svc]
}

type probeKey struct {
	pod    string
	health bool
}

// startProbe runs b.probe on pod unless one with the same health runs already: several
// waits may need the same pod. When a probe ends, the waiters wake, and one whose wait still
// needs it starts it again.
func (b *Backend) startProbe(ctx context.Context, w *podWatch, pod *corev1.Pod, health bool) {
	k := probeKey{string(pod.UID), health}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.probing[k] {
		return
	}
	w.probing[k] = true
	go func() {
		defer func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(w.probing, k)
			w.wake()
		}()
		b.probe(ctx, w, pod, health)
	}()
}

// The kubelet reports a container running only at its next look at the node's containers
// (its relist, once a second), and again when a container it was waiting for (the start
// gate) has exited: two seconds and more that a sample would wait on nothing. It runs a
// healthcheck, the pod's readiness probe, every interval (30 s unless the file says
// otherwise), and can miss the run it triggers as the container starts (it reads the pod's
// status from before the start): a healthy service then stays unready for a whole interval,
// one sample in six on the test cluster.
//
// So, as the Docker backend runs a healthcheck itself, composebox looks for itself while it
// waits: from the moment a pod may start, it execs `true` into its container until one runs
// (the container is running then), at once and then every probeRunningFirst, the interval
// growing by half each time up to probeRunningLongest (many samples starting at once must not
// flood the API server and the kubelet with execs); then, for a healthcheck, it runs the
// healthcheck's command, backing off from probeFirstBackoff to 2 s (or the interval, if
// shorter) until it passes once (the service is healthy then). Only started and healthy are
// met this way (await says why). An image without `true` is left to the kubelet's report.
// The kubelet's probe still decides that a service is unhealthy, and keeps the pod's
// condition for the cluster.
const (
	probeRunningFirst   = 100 * time.Millisecond
	probeRunningLongest = 500 * time.Millisecond
	probeFirstBackoff   = 100 * time.Millisecond
)

// probe looks into pod's container until it sees it running (and, with health, its
// healthcheck passing), or ctx ends. Until the container runs, the look is runs.
func (b *Backend) probe(ctx context.Context, w *podWatch, pod *corev1.Pod, health bool) {
	uid, svc := string(pod.UID), pod.Annotations[labels.ComposeServiceLabel]
	pr := pod.Spec.Containers[0].ReadinessProbe
	health = health && pr != nil && pr.Exec != nil
	t := backend.Target{Container: pod.Namespace + "/" + pod.Name, Service: svc}
	var req backend.ExecRequest
	longest := 2 * time.Second
	if health {
		req = backend.ExecRequest{Cmd: pr.Exec.Command, Timeout: time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second, OutputLimit: 4 << 10}
		longest = min(time.Duration(max(pr.PeriodSeconds, 1))*time.Second, longest)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	backoff, every, running := probeFirstBackoff, probeRunningFirst, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !running {
			if !w.reported(svc) {
				// Bounded by ctx: `true` returns at once where it runs at all.
				if !b.runs(ctx, pod) {
					timer.Reset(every)
					every = min(every*3/2, probeRunningLongest)
					continue
				}
				w.see(uid, sightRunning)
			}
			running = true
			if !health {
				return
			}
		}
		// A probe under way runs to its end (the healthcheck's timeout bounds it) when the wait
		// ends: cancelling its stream would only leave the command behind in the container.
		if res, err := b.Exec(context.WithoutCancel(ctx), t, req); err == nil && res.ExitCode == 0 {
			w.see(uid, sightHealthy)
			return
		}
		timer.Reset(backoff)
		backoff = min(2*backoff, longest)
	}
}

// runs says whether an exec of `true` runs in pod's container, which it does once the
// container runs (and the image has `true`). It goes around the backend's Exec, which takes
// a container it cannot reach for a dead one.
func (b *Backend) runs(ctx context.Context, pod *corev1.Pod) bool {
	_, err := b.execIn(ctx, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, []string{"true"}, nil, io.Discard, io.Discard)
	return err == nil
}

// reported says whether the kubelet reported svc's container running or exited already.
func (w *podWatch) reported(svc string) bool {
	w.mu.Lock()
	pod := w.pods[svc]
	w.mu.Unlock()
	if pod == nil {
		return false
	}
	st, _ := podState(pod, false)
	return st.State != "created"
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
// *backend.NotReadyError naming the services concerned, as on Docker (a pod that cannot be
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
	health := func(svc string) bool {
		// Asked of a service with a healthcheck: started asks nothing of it.
		return p.Services[svc].HealthCheck != nil && conditionRank(conds[svc]) == conditionRank(conditionReady)
	}
	err := w.until(wctx, func(pods map[string]*corev1.Pod) (bool, error) {
		all := true
		for _, svc := range services {
			pod, ok := pods[svc]
			if !ok {
				states[svc] = backend.ServiceState{Service: svc, State: "missing"}
				all = false
				continue
			}
			hc := p.Services[svc].HealthCheck != nil
			st, reason := podState(pod, hc)
			modes.Store(st.ContainerID, modeOf(pod.Annotations))
			// What composebox's own probe sees counts for started, which a container that ran
			// at all meets, and for healthy, which a passing healthcheck shows. A service that
			// must merely be running when the sample is handed over is left to the kubelet's
			// report: a container that exits at once, restarted, runs long enough for an exec
			// now and then, and only the kubelet's report tells that it keeps failing.
			if byProbe := conds[svc] == types.ServiceConditionStarted || health(svc); byProbe && reason == "" && st.State == "created" {
				want := sightRunning
				if health(svc) {
					want = sightHealthy
				}
				if !w.isHeld(svc) && w.sight(string(pod.UID)) < want {
					b.startProbe(wctx, w, pod, health(svc))
				}
				if w.sight(string(pod.UID)) >= sightRunning {
					// Running before the kubelet says so: what its status will say next.
					st.State, st.Ready = backend.StateRunning, !hc
					if hc {
						st.Health = "starting"
					}
				}
			}
			if st.State == backend.StateRunning && hc && st.Health != "healthy" && w.sight(string(pod.UID)) == sightHealthy {
				st.Health, st.Ready = "healthy", true
			}
			ok, why := judge(st, reason, conds[svc], pod.Status.PodIP != "")
			// A running service whose healthcheck has not passed yet, where healthy is asked.
			starting := !ok && why == "" && st.State == backend.StateRunning && st.Health != "" && health(svc)
			if starting {
				b.startProbe(wctx, w, pod, true)
				// Docker calls a service unhealthy after its healthcheck's retries in a row
				// failed; a pod never ready yet has had nothing but failures.
				if n, msg := w.probeFailures(pod.Name); n >= probeThreshold(pod) {
					st.Health = backend.HealthUnhealthy
					why = "unhealthy: " + msg
				}
			}
			states[svc] = st
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

// notReadyError is the contract's not-ready error, each service with its pod's last log lines (and, for
// an unhealthy one, its last probe's output).
func (b *Backend) notReadyError(ctx context.Context, project, reason string, start time.Time, budget time.Duration, states []backend.ServiceState, probe string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nr := &backend.NotReadyError{Project: project, Reason: reason, Waited: time.Since(start), Budget: budget}
	for _, s := range states {
		if s.State == backend.StateRunning && s.Health == "" && reason == "timeout" {
			continue // running without a healthcheck: fine, merely not confirmed yet
		}
		ls := backend.ServiceState{Service: s.Service, ContainerID: s.ContainerID, Container: s.Container, State: s.State,
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
	// Until startService has delivered its binds and released its gate, its container cannot
	// run, and probing it would be wasted.
	w.hold(name, true)
	pod, err := b.podFor(ctx, p, svc)
	if err != nil {
		return nil, err
	}
	pods, _ := w.view()
	pod.Spec.HostAliases = append(pod.Spec.HostAliases, hostAliases(p, name, pods)...)
	if needsGate(p, name) {
		ref, err := b.baseRef(ctx)
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
		if err := b.createService(ctx, p.Name, host, name, pod); err != nil {
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
	w.hold(name, false)
	progress(name, "started")
	return nil
}
