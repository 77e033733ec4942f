// Command engines is the several-engines benchmark (`make bench-engines`), in two parts.
//
// Placement, on fake engines (internal/fakebackend): P placements over E engines of mixed
// capacity through the multi-engine backend's own Place and Up, with image locality (each
// engine starts with a random share of the tasks' images) and churn (samples removed as others
// come). It reports the decision time per placement, the imbalance at the end (max/mean of live
// samples over capacity) and how often a sample landed where its image already was; side by
// side, the same workload placed at random and round robin among the engines with room.
//
// Throughput, on real engines: private dockerds on this host (internal/testutil/dockerd), the
// host's engine serving as the source of the base image only. N samples (SampleInit, one exec,
// Cleanup), W at a time, on one private engine reached directly (a Docker backend over its
// client), then through a backend of several engines (backends.Config.Engines) over 1, 2 and 3
// private engines; samples/min side by side. It needs root.
//
// Usage:
//
//	engines [flags]
//
// Everything it creates on an engine carries the composebox labels and the task name
// cbxbench-engines; the private daemons and their directories are removed at the end.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/bench/internal/mdsection"
	"github.com/composebox/composebox/bench/internal/stats"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/internal/testutil/dockerd"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backends"
)

type options struct {
	Mode       string
	Placements int
	Engines    int
	Tasks      int
	Churn      float64
	Samples    int
	Workers    int
	Out        string
	Section    string
	Seed       uint64
	Order      string
	Rounds     int
}

func main() {
	var o options
	flag.StringVar(&o.Mode, "mode", "all", "placement, throughput or all")
	flag.IntVar(&o.Placements, "placements", 10000, "placements on the fake engines")
	flag.IntVar(&o.Engines, "engines", 50, "fake engines")
	flag.IntVar(&o.Tasks, "tasks", 100, "tasks (one image each) the placed samples belong to")
	flag.Float64Var(&o.Churn, "churn", 0.5, "chance that a live sample is removed after each placement")
	flag.IntVar(&o.Samples, "n", 24, "samples per throughput run")
	flag.IntVar(&o.Workers, "workers", 8, "samples in flight in a throughput run")
	flag.StringVar(&o.Out, "out", "", "also write the results into this Markdown file's section")
	flag.StringVar(&o.Section, "section", "bench-engines", "name of the Markdown section's markers")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the placement workload")
	flag.IntVar(&o.Rounds, "rounds", 2, "rounds of the throughput runs, the order reversed every other round")
	flag.StringVar(&o.Order, "order", "0,1,2,3", "throughput runs in this order: 0 is one engine reached directly, n > 0 is n engines through a backend of several engines")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var out strings.Builder
	fmt.Fprintf(&out, "## Several engines (`make bench-engines`)\n\nRun on %s by `go run ./bench/engines %s` (%s in all). %s\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), strings.Join(os.Args[1:], " "), "%TOTAL%", machine())
	if o.Mode == "placement" || o.Mode == "all" {
		text, err := placementBench(ctx, o)
		if err != nil {
			fail(err)
		}
		out.WriteString(text)
	}
	if o.Mode == "throughput" || o.Mode == "all" {
		text, err := throughputBench(ctx, o)
		if err != nil {
			fail(err)
		}
		out.WriteString(text)
	}
	text := strings.Replace(out.String(), "%TOTAL%", time.Since(start).Round(time.Second).String(), 1)
	fmt.Print(text)
	if o.Out != "" {
		if err := mdsection.Write(o.Out, o.Section, text); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench engines:", err)
	os.Exit(1)
}

// machine describes this host in one line.
func machine() string {
	v := "?"
	if c, _, err := engine.Connect(context.Background(), 0); err == nil {
		if sv, err := c.ServerVersion(context.Background()); err == nil {
			v = sv.Version
		}
		_ = c.Close()
	}
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("Machine: %d CPUs, Docker Engine %s, %s; 1-minute load average at the start %s (other work shares this host).",
		runtime.NumCPU(), v, runtime.Version(), strings.Fields(string(load) + " ?")[0])
}

// ---- placement ----

// workload is one sequence of placements and removals, the same for every policy.
type workload struct {
	caps    []int
	has     [][]bool // engine, task: the task's image is there at the start
	tasks   []int    // each placement's task
	removes []float64
	picks   []float64
	churn   float64
}

func newWorkload(o options) workload {
	r := rand.New(rand.NewPCG(o.Seed, 7))
	w := workload{churn: o.Churn}
	for range o.Engines {
		// Mixed capacity: small machines and big ones.
		w.caps = append(w.caps, []int{40, 80, 160, 320}[r.IntN(4)]+r.IntN(40))
		row := make([]bool, o.Tasks)
		for t := range row {
			row[t] = r.Float64() < 0.2
		}
		w.has = append(w.has, row)
	}
	for range o.Placements {
		// A few tasks are popular: a skewed choice.
		w.tasks = append(w.tasks, int(float64(o.Tasks)*r.Float64()*r.Float64()))
		w.removes = append(w.removes, r.Float64())
		w.picks = append(w.picks, r.Float64())
	}
	return w
}

// outcome is what one policy did with the workload.
type outcome struct {
	name      string
	placed    int
	refused   int
	local     int // placements on an engine that had the image
	imbalance float64
	decisions []float64 // µs per decision (composebox only)
}

func imageOf(task int) string { return fmt.Sprintf("cbxbench/task-%d:1", task) }

// placementBench runs the workload through the multi-engine backend on fakes, then the
// baselines.
func placementBench(ctx context.Context, o options) (string, error) {
	w := newWorkload(o)
	results := []outcome{}
	res, err := placeWithBackend(ctx, w)
	if err != nil {
		return "", err
	}
	results = append(results, res)
	results = append(results, simulate(w, "random", func(r *rand.Rand, room []int, _ int) int { return room[r.IntN(len(room))] }))
	rr := 0
	results = append(results, simulate(w, "round robin", func(_ *rand.Rand, room []int, n int) int {
		for range n {
			rr = (rr + 1) % n
			if slices.Contains(room, rr) {
				return rr
			}
		}
		return room[0]
	}))
	var b strings.Builder
	capTotal := 0
	for _, c := range w.caps {
		capTotal += c
	}
	fmt.Fprintf(&b, "### Placement on fake engines\n\n%d placements over %d fake engines (capacities %d to %d samples, %d in all), samples of %d tasks with one image each (a few tasks popular), each engine starting with a random fifth of the images; after each placement a live sample is removed with chance %.1f. The same workload for each policy.\n\n",
		len(w.tasks), len(w.caps), slices.Min(w.caps), slices.Max(w.caps), capTotal, len(w.has[0]), w.churn)
	b.WriteString("| policy | placed | refused | imbalance at the end (max/mean load) | landed where the image was | decision time p50 | p99 | mean |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		dec := "— | — | —"
		if len(r.decisions) > 0 {
			mean := 0.0
			for _, d := range r.decisions {
				mean += d
			}
			mean /= float64(len(r.decisions))
			dec = fmt.Sprintf("%.1f µs | %.1f µs | %.1f µs", stats.Percentile(r.decisions, 50), stats.Percentile(r.decisions, 99), mean)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.3f | %.1f%% | %s |\n", r.name, r.placed, r.refused, r.imbalance, 100*float64(r.local)/float64(max(r.placed, 1)), dec)
	}
	b.WriteString("\nLoad is live samples over capacity. Decision time is the whole `Place` call of the multi-engine backend (its engines' counts and image presence are cached, then one choice over a snapshot of all engines under its lock); the baselines are computed in memory and have no decision time to compare. Locality for the baselines counts an engine as having an image once a sample of that task went there, as the backend does.\n\n")
	return b.String(), nil
}

// placeWithBackend places the workload through multiengine.Backend over fake engines.
func placeWithBackend(ctx context.Context, w workload) (outcome, error) {
	fakes := make([]*fakebackend.Backend, len(w.caps))
	members := make([]multiengine.Member, len(w.caps))
	for i, c := range w.caps {
		f := fakebackend.New()
		for t, ok := range w.has[i] {
			if ok {
				f.AddImage(imageOf(t), nil)
			}
		}
		fakes[i] = f
		members[i] = multiengine.Member{Name: fmt.Sprintf("e%02d", i), Backend: f, MaxSamples: c}
	}
	// Every task's image somewhere: the first engine lacking all copies gets it.
	for t := range w.has[0] {
		found := false
		for i := range w.has {
			found = found || w.has[i][t]
		}
		if !found {
			fakes[t%len(fakes)].AddImage(imageOf(t), nil)
			w.has[t%len(fakes)][t] = true
		}
	}
	b, err := multiengine.NewFromBackends(members, multiengine.Options{})
	if err != nil {
		return outcome{}, err
	}
	out := outcome{name: "composebox (least loaded, ties to the image)"}
	var live []string
	for i, task := range w.tasks {
		name := fmt.Sprintf("cbxbench-%d", i)
		p := &types.Project{Name: name, Services: types.Services{"default": {Name: "default", Image: imageOf(task),
			CustomLabels: types.Labels{labels.LabelManaged: "true", labels.ComposeProjectLabel: name}}}}
		t0 := time.Now()
		pl, err := b.Place(ctx, backend.PlaceRequest{Project: p})
		out.decisions = append(out.decisions, float64(time.Since(t0).Nanoseconds())/1e3)
		var pe *backend.PlacementError
		switch {
		case errors.As(err, &pe):
			out.refused++
			continue
		case err != nil:
			return out, err
		}
		idx := slices.IndexFunc(members, func(m multiengine.Member) bool { return m.Name == pl.Engine })
		if _, err := fakes[idx].Image(ctx, imageOf(task)); err == nil {
			out.local++
		}
		if err := b.Up(ctx, p, backend.UpOptions{}); err != nil {
			return out, err
		}
		out.placed++
		live = append(live, name)
		if w.removes[i] < w.churn && len(live) > 0 {
			j := int(w.picks[i] * float64(len(live)))
			if _, err := b.Down(ctx, live[j], backend.DownOptions{}); err != nil {
				return out, err
			}
			live = slices.Delete(live, j, j+1)
		}
	}
	loads := make([]float64, len(fakes))
	for i, f := range fakes {
		loads[i] = float64(len(f.Projects())) / float64(w.caps[i])
	}
	out.imbalance = imbalance(loads)
	return out, nil
}

// simulate places the workload with choose (an engine among those with room) in memory.
func simulate(w workload, name string, choose func(r *rand.Rand, room []int, n int) int) outcome {
	r := rand.New(rand.NewPCG(3, 4))
	n := len(w.caps)
	liveN := make([]int, n)
	has := make([][]bool, n)
	for i := range has {
		has[i] = slices.Clone(w.has[i])
	}
	type sample struct{ engine int }
	var live []sample
	out := outcome{name: name}
	for i, task := range w.tasks {
		var room []int
		for e := range n {
			if liveN[e] < w.caps[e] {
				room = append(room, e)
			}
		}
		if len(room) == 0 {
			out.refused++
			continue
		}
		e := choose(r, room, n)
		if has[e][task] {
			out.local++
		}
		has[e][task] = true
		liveN[e]++
		out.placed++
		live = append(live, sample{e})
		if w.removes[i] < w.churn && len(live) > 0 {
			j := int(w.picks[i] * float64(len(live)))
			liveN[live[j].engine]--
			live = slices.Delete(live, j, j+1)
		}
	}
	loads := make([]float64, n)
	for e := range n {
		loads[e] = float64(liveN[e]) / float64(w.caps[e])
	}
	out.imbalance = imbalance(loads)
	return out
}

func imbalance(loads []float64) float64 {
	sum := 0.0
	for _, l := range loads {
		sum += l
	}
	mean := sum / float64(len(loads))
	if mean == 0 {
		return 0
	}
	return slices.Max(loads) / mean
}

// ---- throughput ----

// run is one throughput run's figures.
type run struct {
	name      string
	engines   int
	wall      time.Duration
	done      int
	failed    int
	firstErr  error
	ready     []float64 // ms, SampleInit
	placement map[string]int
	warmup    time.Duration
}

func throughputBench(ctx context.Context, o options) (string, error) {
	if err := dockerd.Available(); err != nil {
		return fmt.Sprintf("### Throughput on private engines\n\nNot run: %v.\n\n", err), nil
	}
	var ds []*dockerd.Daemon
	defer func() {
		for _, d := range ds {
			d.Remove()
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var startErr error
	for i := range 3 {
		wg.Go(func() {
			d, err := dockerd.Start(dockerd.Options{Prefix: fmt.Sprintf("cbxbe%d", i)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				startErr = cmp.Or(startErr, err)
				return
			}
			ds = append(ds, d)
		})
	}
	wg.Wait()
	if startErr != nil {
		return "", startErr
	}
	slices.SortFunc(ds, func(a, b *dockerd.Daemon) int { return strings.Compare(a.Sock, b.Sock) })
	host, _, err := engine.Connect(ctx, 0)
	if err != nil {
		return "", err
	}
	defer host.Close()
	cfgs := []backends.EngineConfig{{Name: "host", Endpoint: host.DaemonHost(), Labels: map[string]string{"role": "source"}}}
	for i, d := range ds {
		cfgs = append(cfgs, backends.EngineConfig{Name: fmt.Sprintf("p%d", i+1), Endpoint: d.Endpoint(),
			Labels: map[string]string{"role": "worker"}, SubnetPool: fmt.Sprintf("10.%d.0.0/16", 231+i)})
	}
	// Seeding (not a run): every private engine gets the base image from the host's engine,
	// streamed, so that every run finds it in place.
	seed, err := throughput(ctx, options{Samples: 0, Workers: 1}, "seed", len(ds), engines(cfgs), true)
	if err != nil {
		return "", fmt.Errorf("seed the engines: %w", err)
	}
	// Rounds alternate the order of the runs (as given, then reversed), so that the load of
	// the moment weighs on every configuration alike; each configuration's rounds add up.
	var runs []run
	byConfig := map[int]int{}
	order := runOrder(o.Order)
	var plan []int
	for round := range max(o.Rounds, 1) {
		next := slices.Clone(order)
		if round%2 == 1 {
			slices.Reverse(next)
		}
		plan = append(plan, next...)
	}
	for _, n := range plan {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		mk := engines(cfgs[:1+n])
		name := fmt.Sprintf("%d engine%s (several engines)", n, map[bool]string{true: "s"}[n > 1])
		if n == 0 {
			c, err := ds[0].Client()
			if err != nil {
				return "", err
			}
			defer c.Close()
			mk = func() (backend.Backend, error) {
				return dockerbackend.New(c, dockerbackend.Options{Subnets: backends.Subnets{Pool: mustPrefix(cfgs[1].SubnetPool)}})
			}
			name = "1 engine, direct (a Docker backend over its client)"
		}
		fmt.Fprintf(os.Stderr, "throughput: %s\n", name)
		r, err := throughput(ctx, o, name, max(n, 1), mk, n > 0)
		if err != nil {
			return "", err
		}
		if i, ok := byConfig[n]; ok {
			runs[i] = runs[i].add(r)
			continue
		}
		byConfig[n] = len(runs)
		runs = append(runs, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Throughput on private engines\n\n%d rounds (the order of the runs reversed every other round, figures added up over the rounds) of %d samples per run, %d in flight: `SampleInit` (the base image, `tail -f /dev/null`), one `Exec` of `true`, `Cleanup`. The private dockerds run on this same host (vfs storage driver, their own bridges), so more engines add no CPU: the figures show what spreading costs and what it does not buy on one machine, not the scaling of real hosts. The orchestrator's own start bound (`Limits.Starts`, 2 × CPUs by default, for all engines together) is in force in every run. Before the runs, one sample on each of the %d private engines at once brought the base image there from the host's engine, streamed (%s, not timed in the runs); each run then starts with one untimed sample per engine (its warm-up column).\n\n", max(o.Rounds, 1), o.Samples, o.Workers, len(ds), seed.warmup.Round(time.Millisecond))
	b.WriteString("| run | samples/min | vs direct | SampleInit p50 | p95 | done | failed | where | warm-up |\n|---|---:|---:|---:|---:|---:|---:|---|---:|\n")
	var direct float64
	for _, r := range runs {
		if r.engines == 1 && strings.Contains(r.name, "direct") {
			direct = perMin(r)
		}
	}
	for _, r := range runs {
		where := []string{}
		for _, k := range slices.Sorted(mapsKeys(r.placement)) {
			where = append(where, fmt.Sprintf("%s %d", k, r.placement[k]))
		}
		ratio := "—"
		if direct > 0 {
			ratio = fmt.Sprintf("%.2f×", perMin(r)/direct)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %s | %.0f ms | %.0f ms | %d | %d | %s | %s |\n", r.name, perMin(r), ratio,
			stats.Percentile(r.ready, 50), stats.Percentile(r.ready, 95), r.done, r.failed, strings.Join(where, ", "), r.warmup.Round(time.Millisecond))
	}
	for _, r := range runs {
		if r.firstErr != nil {
			fmt.Fprintf(&b, "\nFirst error of %s: `%v`\n", r.name, r.firstErr)
		}
	}
	b.WriteString("\n")
	return b.String(), nil
}

// add is two rounds of one configuration as one.
func (r run) add(o run) run {
	r.wall += o.wall
	r.done += o.done
	r.failed += o.failed
	r.firstErr = cmp.Or(r.firstErr, o.firstErr)
	r.ready = append(r.ready, o.ready...)
	for k, v := range o.placement {
		r.placement[k] += v
	}
	r.warmup += o.warmup
	return r
}

func mapsKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func perMin(r run) float64 {
	if r.wall <= 0 {
		return 0
	}
	return float64(r.done) / r.wall.Minutes()
}

// engines makes the backend of several engines cfgs name, through the factory.
func engines(cfgs []backends.EngineConfig) func() (backend.Backend, error) {
	return func() (backend.Backend, error) { return backends.New(backends.Config{Engines: cfgs}) }
}

// throughput runs o.Samples samples, o.Workers at a time, on an orchestrator over the backend
// mk makes.
func throughput(ctx context.Context, o options, name string, engines int, mk func() (backend.Backend, error), several bool) (run, error) {
	r := run{name: name, engines: engines, placement: map[string]int{}}
	dir, err := os.MkdirTemp("", "cbxbench-engines-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	b, err := mk()
	if err != nil {
		return r, err
	}
	defer b.Close()
	orch, err := orchestrator.New(orchestrator.WithBackend(b), orchestrator.WithStateDir(dir))
	if err != nil {
		return r, err
	}
	defer orch.Close()
	spec := orchestrator.TaskSpec{Name: "cbxbench-engines", YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`)}
	if several {
		spec.EngineLabels = map[string]string{"role": "worker"}
	}
	task, err := orch.TaskInit(ctx, spec)
	if err != nil {
		return r, err
	}
	defer func() { _ = task.Cleanup(context.WithoutCancel(ctx)) }()
	// Warm-up: one sample on each engine, at once.
	t0 := time.Now()
	var warm []*orchestrator.Sample
	var wmu sync.Mutex
	var wg sync.WaitGroup
	for range engines {
		wg.Go(func() {
			s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
			wmu.Lock()
			defer wmu.Unlock()
			if err != nil {
				r.firstErr = cmp.Or(r.firstErr, err)
				return
			}
			warm = append(warm, s)
		})
	}
	wg.Wait()
	for _, s := range warm {
		_ = s.Cleanup(ctx)
	}
	r.warmup = time.Since(t0)
	if r.firstErr != nil {
		return r, fmt.Errorf("%s: warm-up: %w", name, r.firstErr)
	}

	jobs := make(chan int)
	var mu sync.Mutex
	start := time.Now()
	for range o.Workers {
		wg.Go(func() {
			for range jobs {
				t := time.Now()
				s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
				ready := time.Since(t)
				if err == nil {
					var res orchestrator.ExecResult
					res, err = s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("exec true: exit code %d", res.ExitCode)
					}
					if cerr := s.Cleanup(ctx); err == nil {
						err = cerr
					}
				}
				mu.Lock()
				if err != nil {
					r.failed++
					r.firstErr = cmp.Or(r.firstErr, err)
				} else {
					r.done++
					r.ready = append(r.ready, float64(ready.Milliseconds()))
					r.placement[cmp.Or(s.Engine(), "?")]++
				}
				mu.Unlock()
			}
		})
	}
	for i := range o.Samples {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	r.wall = time.Since(start)
	return r, nil
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// runOrder reads -order.
func runOrder(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err == nil && n >= 0 && n <= 3 {
			out = append(out, n)
		}
	}
	return out
}
