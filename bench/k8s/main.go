// Command k8s is the Kubernetes benchmark (`make bench-k8s`): the Kubernetes backend
// (package kubernetes, on the local cluster `make k8s` brings up) against the Docker backend,
// both through the orchestrator, in one process and one run, on the same projects. Three
// parts:
//
//   - ready: SampleInit until ready, then Sample.Cleanup, one sample at a time, in batches
//     that alternate between the backends (the order reversed every other round), so that the
//     load of the moment weighs on both alike;
//   - exec: `true` through Sandbox.Exec on each backend's live sample, and through a bare
//     client-go exec on the Kubernetes sample's own pod (one executor per call, WebSocket with
//     the SPDY fallback, as the backend makes them: k8stest.Exec), in rotating batches;
//   - pool: a warm pool (Task.Prewarm) on each backend, and SampleInit taking from it; the
//     take's time is the whole SampleInit call, once the pool is full again.
//
// It reads KUBECONFIG and COMPOSEBOX_REGISTRY from bin/k8s/env (as internal/k8stest does) and
// stops, saying to run `make k8s`, when the file is absent or the cluster does not answer.
//
// Usage:
//
//	k8s [flags]
//
// Everything it creates carries composebox's labels and the task names cbxbench-k8s and
// cbxbench-k8s-pool and cbxbench-k8s-shared; Task.Cleanup removes it, also on SIGINT/SIGTERM, and the run fails when a
// namespace of its tasks is still there at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/composebox/composebox/bench/internal/mdsection"
	"github.com/composebox/composebox/bench/internal/stats"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backends"
)

const (
	taskName       = "cbxbench-k8s"
	poolTaskName   = "cbxbench-k8s-pool"
	sharedTaskName = "cbxbench-k8s-shared"
)

type options struct {
	Env          string
	Projects     []string
	PoolProjects []string
	InitRounds   int
	Batch        int
	ExecRounds   int
	ExecBatch    int
	PoolRounds   int
	Pool         int
	Out          string
	Section      string
}

// side is one backend under the orchestrator, and what its events tell.
type side struct {
	name string
	orc  *orchestrator.Orchestrator
	mu   sync.Mutex
	// steps are, by sample id, the time from the start of SampleInit to each step the
	// events name: the backend's Up returned, a service created, started or ready.
	steps map[string]map[string]time.Duration
	taken map[string]time.Duration // sample id → EventPoolTaken's duration
	warm  []time.Time              // when each pooled sample became ready
}

func newSide(name string) *side {
	return &side{name: name, steps: map[string]map[string]time.Duration{}, taken: map[string]time.Duration{}}
}

func (s *side) observe(e orchestrator.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	step := func(name string) {
		m := s.steps[e.Sample]
		if m == nil {
			m = map[string]time.Duration{}
			s.steps[e.Sample] = m
		}
		if _, ok := m[name]; !ok {
			m[name] = e.Duration
		}
	}
	switch e.Kind {
	case orchestrator.EventPoolTaken:
		s.taken[e.Sample] = e.Duration
	case orchestrator.EventPoolWarm:
		s.warm = append(s.warm, e.Time)
	case orchestrator.EventSampleStarted:
		step("Up returned")
	case orchestrator.EventServiceReady:
		step(e.Service + " ready")
	case orchestrator.EventServiceProgress:
		if st := strings.ToLower(e.Message); st == "created" || st == "started" {
			step(e.Service + " " + st)
		}
	}
}

func (s *side) hit(id string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.taken[id]
	return d, ok
}

// stepsOf is the steps the events recorded for sample id.
func (s *side) stepsOf(id string) map[string]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps[id]
}

// warmAfter is when the first pooled sample became ready after t.
func (s *side) warmAfter(t time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.warm {
		if w.After(t) {
			return w, true
		}
	}
	return time.Time{}, false
}

// figures are one side's measurements on one project.
type figures struct {
	ready, teardown []float64 // ms
	readyFail       int
	steps           map[string][]float64 // step → ms from the start of SampleInit, by sample
	exec            []float64
	execFail        int
	take, takeEvent []float64
	refill          []float64
	hits, takes     int
	// the same of a shared pool (TaskSpec.SharePool): every take is a claim on the cluster
	sharedTake, sharedRefill []float64
	sharedHits, sharedTakes  int
	firstErr                 error
}

// ways are the figures' keys: the backends, and the bare client-go execs (exec only).
var wayNames = []string{"docker", "kubernetes", "client-go", "client-go-shell"}

func newFigures() map[string]*figures {
	m := map[string]*figures{}
	for _, w := range wayNames {
		m[w] = &figures{steps: map[string][]float64{}}
	}
	return m
}

func (f *figures) fail(err error) {
	if f.firstErr == nil {
		f.firstErr = err
	}
}

type result struct {
	project string
	// by side: "docker", "kubernetes", and "client-go" (the bare exec, exec only)
	by map[string]*figures
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	var o options
	var projects, poolProjects string
	fs := flag.NewFlagSet("k8s", flag.ContinueOnError)
	fs.StringVar(&o.Env, "env", "", "the local cluster's env file (default: bin/k8s/env of the repository)")
	fs.StringVar(&projects, "projects", "bench/projects/two-service,testdata/projects/multi-service", "projects, comma-separated")
	fs.StringVar(&poolProjects, "pool-projects", "bench/projects/two-service", "projects of the pool part, comma-separated (none: no pool part)")
	fs.IntVar(&o.InitRounds, "init-rounds", 3, "rounds of the ready part; each runs one batch per backend per project")
	fs.IntVar(&o.Batch, "batch", 2, "samples per batch in the ready part, one at a time")
	fs.IntVar(&o.ExecRounds, "exec-rounds", 5, "rounds of the exec part; each runs one batch per way of exec per project")
	fs.IntVar(&o.ExecBatch, "exec-batch", 10, "execs per batch in the exec part, one at a time")
	fs.IntVar(&o.PoolRounds, "pool-rounds", 5, "takes from the pool per backend per project")
	fs.IntVar(&o.Pool, "pool", 1, "warm pool size")
	fs.StringVar(&o.Out, "out", "", "also write the results into this Markdown file's section")
	fs.StringVar(&o.Section, "section", "bench-k8s", "name of the Markdown section's markers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.Projects = absList(projects)
	o.PoolProjects = absList(poolProjects)
	began := time.Now()
	text, err := bench(ctx, o, strings.Join(args, " "))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-k8s:", err)
		return 1
	}
	text = strings.Replace(text, "%TOTAL%", time.Since(began).Round(time.Second).String(), 1)
	fmt.Print(text)
	if o.Out != "" {
		if err := mdsection.Write(o.Out, o.Section, text); err != nil {
			fmt.Fprintln(os.Stderr, "bench-k8s:", err)
			return 1
		}
	}
	return 0
}

func absList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		out = append(out, p)
	}
	return out
}

// cluster reads the env file and connects to the cluster it names, failing with what to do
// when no cluster is up.
func cluster(ctx context.Context, path string) (k8stest.Env, *rest.Config, *kubernetes.Backend, string, error) {
	if path == "" {
		p, err := k8stest.EnvPath()
		if err != nil {
			return k8stest.Env{}, nil, nil, "", err
		}
		path = p
	}
	env, err := k8stest.ReadEnv(path)
	if err != nil {
		return env, nil, nil, "", err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		return env, nil, nil, "", fmt.Errorf("load kubeconfig %s from %s: %w (run `make k8s`)", env.Kubeconfig, path, err)
	}
	var dns []string
	if env.DNS != "" {
		dns = []string{env.DNS}
	}
	kb, err := backends.Kubernetes(kubernetes.Options{Config: cfg, Registry: env.Registry, DNS: dns, VolumeRoot: env.Volumes})
	if err != nil {
		return env, nil, nil, "", err
	}
	info, err := kb.Ping(ctx, 10*time.Second)
	if err != nil {
		kb.Close()
		return env, nil, nil, "", fmt.Errorf("the local cluster does not answer (%v): run `make k8s`", err)
	}
	return env, cfg, kb, info.APIVersion, nil
}

func bench(ctx context.Context, o options, args string) (string, error) {
	env, cfg, kb, version, err := cluster(ctx, o.Env)
	if err != nil {
		return "", err
	}
	defer kb.Close()
	dir, err := os.MkdirTemp("", "cbxbench-k8s-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)

	docker, kube := newSide("docker"), newSide("kubernetes")
	docker.orc, err = orchestrator.New(orchestrator.WithStateDir(filepath.Join(dir, "docker")), orchestrator.WithObserver(docker.observe))
	if err != nil {
		return "", err
	}
	defer docker.orc.Close()
	kube.orc, err = orchestrator.New(orchestrator.WithBackend(kb), orchestrator.WithStateDir(filepath.Join(dir, "kubernetes")), orchestrator.WithObserver(kube.observe))
	if err != nil {
		return "", err
	}
	defer kube.orc.Close()
	sides := []*side{docker, kube}
	dockerVersion := "?"
	if info, err := docker.orc.Backend().Ping(ctx, 0); err == nil {
		dockerVersion = info.APIVersion
	}
	load, _ := os.ReadFile("/proc/loadavg")

	// Every task is removed at the end, whatever happened, and the cluster is checked for
	// namespaces of this run's tasks left behind.
	var tasks []*orchestrator.Task
	defer func() {
		for _, t := range tasks {
			if err := t.Cleanup(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(os.Stderr, "bench-k8s: cleanup of %s: %v\n", t.Name(), err)
			}
		}
	}()
	taskInit := func(s *side, name, project string, shared bool) (*orchestrator.Task, error) {
		t, err := s.orc.TaskInit(ctx, orchestrator.TaskSpec{Name: name, Path: project, SharePool: shared})
		if err != nil {
			return nil, fmt.Errorf("%s: task init of %s: %w", s.name, filepath.Base(project), err)
		}
		tasks = append(tasks, t)
		return t, nil
	}

	var results []*result
	for _, project := range o.Projects {
		r := &result{project: project, by: newFigures()}
		results = append(results, r)
		byTask := map[*side]*orchestrator.Task{}
		for _, s := range sides {
			t, err := taskInit(s, taskName, project, false)
			if err != nil {
				return "", err
			}
			byTask[s] = t
		}
		if err := readyPart(ctx, o, r, sides, byTask); err != nil {
			return "", err
		}
		if err := execPart(ctx, o, r, cfg, kb, sides, byTask); err != nil {
			return "", err
		}
	}
	for _, project := range o.PoolProjects {
		r := find(results, project)
		if r == nil {
			r = &result{project: project, by: newFigures()}
			results = append(results, r)
		}
		for _, shared := range []bool{false, true} {
			byTask := map[*side]*orchestrator.Task{}
			for _, s := range sides {
				t, err := taskInit(s, map[bool]string{false: poolTaskName, true: sharedTaskName}[shared], project, shared)
				if err != nil {
					return "", err
				}
				byTask[s] = t
			}
			if err := poolPart(ctx, o, r, sides, byTask, shared); err != nil {
				return "", err
			}
		}
	}

	// Remove everything now, so that the leftover check below sees the end state.
	for _, t := range tasks {
		if err := t.Cleanup(context.WithoutCancel(ctx)); err != nil {
			return "", fmt.Errorf("cleanup of %s: %w", t.Name(), err)
		}
	}
	tasks = nil
	if err := leftovers(ctx, kb); err != nil {
		return "", err
	}
	head := fmt.Sprintf("## Kubernetes against Docker (`make bench-k8s`)\n\nRun on %s by `go run ./bench/k8s%s` (%%TOTAL%% in all). Machine: %d CPUs; Docker Engine API %s; Kubernetes %s, one node (`make k8s`: containerd, registry at %s); %s; 1-minute load average at the start %s (other work shares this host).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), prefixed(args), runtime.NumCPU(), dockerVersion, version, env.Registry,
		runtime.Version(), strings.Fields(string(load) + " ?")[0])
	return head + render(o, results), nil
}

func prefixed(args string) string {
	if args == "" {
		return ""
	}
	return " " + args
}

func find(rs []*result, project string) *result {
	for _, r := range rs {
		if r.project == project {
			return r
		}
	}
	return nil
}

// order is the sides of round r: as given in even rounds, reversed in odd ones.
func order[T any](xs []T, r int) []T {
	out := slices.Clone(xs)
	if r%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// readyPart starts and removes samples one at a time, in alternating batches, after one
// untimed sample per side (the first pull of the images onto the node, the first namespace).
func readyPart(ctx context.Context, o options, r *result, sides []*side, tasks map[*side]*orchestrator.Task) error {
	name := filepath.Base(r.project)
	for _, s := range sides {
		if _, _, err := oneSample(ctx, tasks[s], name+"-warmup"); err != nil {
			return fmt.Errorf("%s: warm-up sample of %s: %w", s.name, name, err)
		}
	}
	for round := range o.InitRounds {
		for _, s := range order(sides, round) {
			f := r.by[s.name]
			for i := range o.Batch {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				id := fmt.Sprintf("%s-%d-%d", name, round, i)
				ready, down, err := oneSample(ctx, tasks[s], id)
				if err != nil {
					f.readyFail++
					f.fail(err)
					fmt.Fprintf(os.Stderr, "  ready %s %s: %v\n", name, s.name, err)
					continue
				}
				f.ready = append(f.ready, ms(ready))
				f.teardown = append(f.teardown, ms(down))
				for step, d := range s.stepsOf(id) {
					f.steps[step] = append(f.steps[step], ms(d))
				}
			}
			fmt.Fprintf(os.Stderr, "ready %s round %d %s: p50 %.0f ms\n", name, round+1, s.name, stats.Percentile(f.ready, 50))
		}
	}
	return nil
}

// oneSample is SampleInit (timed), one exec of `true` (checked), Sample.Cleanup (timed).
func oneSample(ctx context.Context, t *orchestrator.Task, id string) (ready, down time.Duration, err error) {
	t0 := time.Now()
	s, err := t.SampleInit(ctx, orchestrator.SampleSpec{ID: id})
	ready = time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exec true in %s: exit code %d", s.Project(), res.ExitCode)
	}
	t1 := time.Now()
	if cerr := s.Cleanup(context.WithoutCancel(ctx)); err == nil {
		err = cerr
	}
	return ready, time.Since(t1), err
}

// execPart runs `true` on one live sample per side, and through a bare client-go exec in the
// Kubernetes sample's pod, in batches whose order rotates every round.
func execPart(ctx context.Context, o options, r *result, cfg *rest.Config, kb *kubernetes.Backend, sides []*side, tasks map[*side]*orchestrator.Task) error {
	name := filepath.Base(r.project)
	type way struct {
		name string
		exec func() error
	}
	var ways []way
	for _, s := range sides {
		sample, err := tasks[s].SampleInit(ctx, orchestrator.SampleSpec{})
		if err != nil {
			return fmt.Errorf("%s: sample of %s for the execs: %w", s.name, name, err)
		}
		defer func() { _ = sample.Cleanup(context.WithoutCancel(ctx)) }()
		sb := sample.Default()
		ways = append(ways, way{s.name, func() error {
			res, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit code %d", res.ExitCode)
			}
			return err
		}})
		if s.name == "kubernetes" {
			ns, pod, ok := strings.Cut(sb.ContainerID(), "/")
			if !ok {
				return fmt.Errorf("kubernetes: container id %q is not namespace/pod", sb.ContainerID())
			}
			cs := kb.Clientset()
			bare := func(argv ...string) func() error {
				return func() error {
					res, err := k8stest.Exec(ctx, cfg, cs, ns, pod, argv...)
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("exit code %d", res.ExitCode)
					}
					return err
				}
			}
			ways = append(ways, way{"client-go", bare("true")})
			// The backend runs every command under a shell wrapper that ends in env(1) (see
			// kubernetes/exec.go): the same chain of processes, without the wrapper's user
			// lookup, tells the processes' share of the difference from the network's.
			ways = append(ways, way{"client-go-shell", bare("sh", "-c", `exec env "$@"`, "sh", "true")})
		}
	}
	// Warm-up: connections made, the backend's per-container caches filled.
	for _, w := range ways {
		for range 3 {
			if err := w.exec(); err != nil {
				return fmt.Errorf("%s: warm-up exec in %s: %w", w.name, name, err)
			}
		}
	}
	for round := range o.ExecRounds {
		// Rotate: each way goes first, second and last in turn.
		k := round % len(ways)
		rot := append(slices.Clone(ways[k:]), ways[:k]...)
		for _, w := range rot {
			f := r.by[w.name]
			for range o.ExecBatch {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				t0 := time.Now()
				err := w.exec()
				d := time.Since(t0)
				if err != nil {
					f.execFail++
					f.fail(err)
					continue
				}
				f.exec = append(f.exec, ms(d))
			}
		}
	}
	for _, w := range ways {
		fmt.Fprintf(os.Stderr, "exec %s %s: p50 %.1f ms\n", name, w.name, stats.Percentile(r.by[w.name].exec, 50))
	}
	return nil
}

// poolPart keeps a pool of o.Pool on each side and takes from it, alternating sides; before
// each take the pool is full again. shared: the tasks' pools are shared (TaskSpec.SharePool),
// so that every take claims its sample through the backend.
func poolPart(ctx context.Context, o options, r *result, sides []*side, tasks map[*side]*orchestrator.Task, shared bool) error {
	name := filepath.Base(r.project)
	for _, s := range sides {
		if err := tasks[s].Prewarm(ctx, o.Pool); err != nil {
			return fmt.Errorf("%s: prewarm %s: %w", s.name, name, err)
		}
	}
	kind := map[bool]string{false: "pool", true: "shared"}[shared]
	takenAt := map[*side][]time.Time{}
	for round := range o.PoolRounds {
		for _, s := range order(sides, round) {
			f := r.by[s.name]
			t := tasks[s]
			if err := full(ctx, t, o.Pool); err != nil {
				return fmt.Errorf("%s: pool of %s: %w", s.name, name, err)
			}
			id := fmt.Sprintf("%s-%s-%d", kind, name, round)
			t1 := time.Now()
			sample, err := t.SampleInit(ctx, orchestrator.SampleSpec{ID: id})
			took := time.Since(t1)
			if shared {
				f.sharedTakes++
			} else {
				f.takes++
			}
			if err != nil {
				f.fail(err)
				fmt.Fprintf(os.Stderr, "  take %s %s %s: %v\n", kind, name, s.name, err)
				continue
			}
			if ev, ok := s.hit(id); ok {
				takenAt[s] = append(takenAt[s], t1)
				if shared {
					f.sharedHits++
					f.sharedTake = append(f.sharedTake, ms(took))
				} else {
					f.hits++
					f.take = append(f.take, ms(took))
					f.takeEvent = append(f.takeEvent, ms(ev))
				}
			}
			res, err := sample.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exec true in a pooled sample: exit code %d", res.ExitCode)
			}
			if cerr := sample.Cleanup(context.WithoutCancel(ctx)); err == nil {
				err = cerr
			}
			if err != nil {
				f.fail(err)
			}
		}
	}
	for _, s := range sides {
		if err := full(ctx, tasks[s], o.Pool); err != nil {
			return fmt.Errorf("%s: pool of %s: %w", s.name, name, err)
		}
		f := r.by[s.name]
		for _, t := range takenAt[s] {
			if w, ok := s.warmAfter(t); ok {
				if shared {
					f.sharedRefill = append(f.sharedRefill, ms(w.Sub(t)))
				} else {
					f.refill = append(f.refill, ms(w.Sub(t)))
				}
			}
		}
		takes := map[bool][]float64{false: f.take, true: f.sharedTake}[shared]
		fmt.Fprintf(os.Stderr, "%s %s %s: take p50 %.2f ms (%d)\n", kind, name, s.name, stats.Percentile(takes, 50), len(takes))
		if err := tasks[s].Prewarm(ctx, 0); err != nil {
			return err
		}
	}
	return nil
}

// full waits until the task's pool holds n ready samples, failing when its refills keep
// failing. The pool reports no change, so its status is read every 20 ms.
func full(ctx context.Context, t *orchestrator.Task, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		st := t.PoolStatus()
		if st.Ready >= n {
			return nil
		}
		if st.Failures >= 3 {
			return fmt.Errorf("%d refills failed in a row", st.Failures)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool not full: %w (ready %d of %d)", ctx.Err(), st.Ready, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leftovers waits until no namespace of this run's tasks is left (they terminate in the
// background after Cleanup), and fails naming those that stay.
func leftovers(ctx context.Context, kb *kubernetes.Backend) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	sel := labels.LabelTask + " in (" + strings.Join([]string{taskName, poolTaskName, sharedTaskName}, ",") + ")"
	for {
		list, err := kb.Clientset().CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("list namespaces left behind: %w", err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			var names []string
			for _, ns := range list.Items {
				names = append(names, ns.Name)
			}
			return fmt.Errorf("namespaces left behind: %s", strings.Join(names, ", "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// num prints a figure with two decimals when it is small, one below 100, none above.
func num(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func ratio(a, b float64) string {
	if b <= 0 || a <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func p(xs []float64, q float64) string {
	if len(xs) == 0 {
		return "–"
	}
	return num(stats.Percentile(xs, q)) + " ms"
}

func met(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

func render(o options, rs []*result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Both backends run under the orchestrator in this one process, on the same projects; figures are nearest-rank percentiles.\n\n")

	fmt.Fprintf(&b, "### SampleInit to ready\n\n%d rounds per project, each one batch of %d samples per backend, one sample at a time (the backends' order reversed every other round), after one untimed sample per backend: `SampleInit` until it returns ready, one exec of `true`, `Sample.Cleanup` (its time is the teardown column).\n\n", o.InitRounds, o.Batch)
	b.WriteString("| project | Docker p50 | p95 | Kubernetes p50 | p95 | Kubernetes / Docker, p50 | teardown p50, Docker / Kubernetes | failed | goal |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	var goals []string
	for _, r := range rs {
		d, k := r.by["docker"], r.by["kubernetes"]
		if len(d.ready)+len(k.ready)+d.readyFail+k.readyFail == 0 {
			continue
		}
		goal := ""
		if filepath.Base(r.project) == "two-service" {
			kp := stats.Percentile(k.ready, 50)
			ok := len(k.ready) > 0 && kp <= 3000
			goal = "≤ 3 s p50 on Kubernetes: " + met(ok)
			goals = append(goals, fmt.Sprintf("two-service sample ready ≤ 3 s p50 on the single-node cluster: %s (%s)", met(ok), p(k.ready, 50)))
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s / %s | %d / %d | %s |\n", filepath.Base(r.project),
			p(d.ready, 50), p(d.ready, 95), p(k.ready, 50), p(k.ready, 95),
			ratio(stats.Percentile(k.ready, 50), stats.Percentile(d.ready, 50)),
			p(d.teardown, 50), p(k.teardown, 50), d.readyFail, k.readyFail, goal)
	}

	b.WriteString("\nWhere the time to ready goes: the p50, over the timed samples, of the time from the start of `SampleInit` to each step the orchestrator's events name (`service_progress` created/started, `service_ready`, `sample_started` when the backend's `Up` returned), in order.\n\n| project | backend | steps, p50 from the start of `SampleInit` |\n|---|---|---|\n")
	for _, r := range rs {
		for _, name := range []string{"docker", "kubernetes"} {
			f := r.by[name]
			if len(f.steps) == 0 {
				continue
			}
			type step struct {
				name string
				p50  float64
			}
			var st []step
			for k, v := range f.steps {
				st = append(st, step{k, stats.Percentile(v, 50)})
			}
			st = append(st, step{"`SampleInit` returned", stats.Percentile(f.ready, 50)})
			slices.SortStableFunc(st, func(a, b step) int {
				switch {
				case a.p50 < b.p50:
					return -1
				case a.p50 > b.p50:
					return 1
				}
				return strings.Compare(a.name, b.name)
			})
			var parts []string
			for _, x := range st {
				parts = append(parts, fmt.Sprintf("%s %s", x.name, p([]float64{x.p50}, 50)))
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", filepath.Base(r.project), name, strings.Join(parts, " → "))
		}
	}

	fmt.Fprintf(&b, "\n### Exec round trip (`true`)\n\nOn one live sample per backend per project, `true` in the default service: through `Sandbox.Exec` on each backend, and through a bare client-go exec in the Kubernetes sample's own pod (one executor per call, WebSocket with the SPDY fallback, the way the backend makes them, running `true` directly where the backend runs it under its wrapper shell; and, to tell what that wrapper's processes cost, the same bare exec of `true` under `sh` and `env` as the wrapper runs it, without its user lookup). %d rounds of a batch of %d execs per way, one exec at a time, the ways' order rotating every round, after 3 untimed execs each.\n\n", o.ExecRounds, o.ExecBatch)
	b.WriteString("| project | Docker `Sandbox.Exec` p50 | p95 | Kubernetes `Sandbox.Exec` p50 | p95 | bare client-go p50 | p95 | bare client-go, `sh -c 'exec env \"$@\"' sh true`, p50 | Kubernetes / client-go, p50 | Kubernetes / Docker, p50 | failed | goal |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		d, k, c, sh := r.by["docker"], r.by["kubernetes"], r.by["client-go"], r.by["client-go-shell"]
		if len(d.exec)+len(k.exec)+len(c.exec) == 0 {
			continue
		}
		kp, cp := stats.Percentile(k.exec, 50), stats.Percentile(c.exec, 50)
		ok := len(k.exec) > 0 && len(c.exec) > 0 && kp <= 1.2*cp
		goals = append(goals, fmt.Sprintf("`%s`: exec ≤ 1.2× bare client-go at p50: %s (%s)", filepath.Base(r.project), met(ok), ratio(kp, cp)))
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d / %d / %d / %d | ≤ 1.2× client-go: %s |\n", filepath.Base(r.project),
			p(d.exec, 50), p(d.exec, 95), p(k.exec, 50), p(k.exec, 95), p(c.exec, 50), p(c.exec, 95), p(sh.exec, 50),
			ratio(kp, cp), ratio(kp, stats.Percentile(d.exec, 50)), d.execFail, k.execFail, c.execFail, sh.execFail, met(ok))
	}

	if len(o.PoolProjects) > 0 {
		fmt.Fprintf(&b, "\n### Warm pool take\n\nA pool of %d per backend (`Task.Prewarm`), then %d rounds per backend (order reversed every other round): wait until the pool is full again, then `SampleInit` (timed as the caller sees it), one exec of `true`, `Sample.Cleanup`. A take counts when the orchestrator's `pool_taken` event names the sample. Refill is the time from the take to the replacement's `pool_warm` event. Twice: a pool of this process's own (a take is a lock and a slice in memory), then a shared one (`TaskSpec.SharePool`: every take, this process's own included, claims the sample through the backend: on Kubernetes a GET and a conditional UPDATE of the sample's namespace, the step a claim by another process makes). agent-sandbox publishes about 1 s p50 for a claim.\n\n", o.Pool, o.PoolRounds)
		b.WriteString("| project | pool | Docker take p50 | p95 | Kubernetes take p50 | p95 | taken from the pool, Docker / Kubernetes | refill p50, Docker / Kubernetes | goal |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range rs {
			d, k := r.by["docker"], r.by["kubernetes"]
			if d.takes+k.takes+d.sharedTakes+k.sharedTakes == 0 {
				continue
			}
			name := filepath.Base(r.project)
			ok := len(k.take) > 0 && k.hits == k.takes && stats.Percentile(k.take, 50) <= 50
			okShared := len(k.sharedTake) > 0 && k.sharedHits == k.sharedTakes && stats.Percentile(k.sharedTake, 50) <= 50
			goals = append(goals, fmt.Sprintf("`%s`: pool take ≤ 50 ms p50 on Kubernetes: %s (%s, %d of %d from the pool); from a shared pool, a claim through the API server: %s (%s, %d of %d)",
				name, met(ok), p(k.take, 50), k.hits, k.takes, met(okShared), p(k.sharedTake, 50), k.sharedHits, k.sharedTakes))
			fmt.Fprintf(&b, "| `%s` | own | %s | %s | %s | %s | %d of %d / %d of %d | %s / %s | ≤ 50 ms on Kubernetes: %s |\n", name,
				p(d.take, 50), p(d.take, 95), p(k.take, 50), p(k.take, 95), d.hits, d.takes, k.hits, k.takes,
				p(d.refill, 50), p(k.refill, 50), met(ok))
			fmt.Fprintf(&b, "| `%s` | shared | %s | %s | %s | %s | %d of %d / %d of %d | %s / %s | ≤ 50 ms on Kubernetes: %s |\n", name,
				p(d.sharedTake, 50), p(d.sharedTake, 95), p(k.sharedTake, 50), p(k.sharedTake, 95), d.sharedHits, d.sharedTakes, k.sharedHits, k.sharedTakes,
				p(d.sharedRefill, 50), p(k.sharedRefill, 50), met(okShared))
		}
	}

	b.WriteString("\n**Goals.**\n\n")
	for _, g := range goals {
		fmt.Fprintf(&b, "- %s\n", g)
	}
	var errs []string
	for _, r := range rs {
		for _, name := range wayNames {
			if f := r.by[name]; f.firstErr != nil {
				errs = append(errs, fmt.Sprintf("- `%s`, %s: `%v`", filepath.Base(r.project), name, oneLine(f.firstErr)))
			}
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nFirst errors:\n\n" + strings.Join(errs, "\n") + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

func oneLine(err error) string {
	s := err.Error()
	for u := errors.Unwrap(err); u != nil && len(s) > 300; u = errors.Unwrap(u) {
		s = u.Error()
	}
	return strings.ReplaceAll(s, "\n", " ")
}
