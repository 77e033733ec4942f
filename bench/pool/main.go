// Command pool is the warm pool benchmark (`make bench-pool`). It runs a runner's pattern
// twice in one run, side by side: W workers push N samples of a task through, each sample
// SampleInit, 5 execs, a simulated agent turn (a wait), and Sample.Cleanup; first with cold
// starts, then with a warm pool of P samples (filled before the clock starts, as a runner's
// TaskInit would). It reports time-to-ready (the whole SampleInit call, queueing included)
// p50/p95, the whole run's wall time, how many SampleInits the pool served, and every failure:
// none may come from the pool's refills.
//
// Usage:
//
//	pool [flags]
//
// Everything it creates carries the composebox labels and the task names cbxbench-pool-cold and
// cbxbench-pool-warm; Task.Cleanup removes it, also on SIGINT/SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/composebox/composebox/bench/internal/mdsection"
	"github.com/composebox/composebox/bench/internal/stats"
	"github.com/composebox/composebox/orchestrator"
)

type options struct {
	N       int
	Workers int
	Pool    int
	Agent   time.Duration
	Project string
	Out     string
	Note    string
	Section string
}

type sideResult struct {
	Side      string
	Done      int
	Failed    int
	FirstErr  string
	Wall      time.Duration
	ReadyMS   []float64
	HitMS     []float64 // time to ready of the SampleInits the pool served
	Hits      int
	RefillErr int
	FillTime  time.Duration
	// CPUBusy is the share of the host's CPU time that was not idle during the run.
	CPUBusy float64
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	var o options
	fs := flag.NewFlagSet("pool", flag.ContinueOnError)
	fs.IntVar(&o.N, "n", 100, "samples per side")
	fs.IntVar(&o.Workers, "workers", 16, "workers (samples in flight) per side")
	fs.IntVar(&o.Pool, "pool", 8, "warm pool size of the pool side")
	fs.DurationVar(&o.Agent, "agent", 2*time.Second, "simulated agent time per sample")
	fs.StringVar(&o.Project, "project", "bench/projects/two-service", "task project")
	fs.StringVar(&o.Out, "out", "", "also write the results into this Markdown file's warm pool section")
	fs.StringVar(&o.Note, "note", "", "a note on the run's conditions, for the Markdown")
	fs.StringVar(&o.Section, "section", "bench-pool", "name of the Markdown section's markers, so that several runs keep a section each")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if abs, err := filepath.Abs(o.Project); err == nil {
		o.Project = abs
	}
	began := time.Now().UTC()
	var results []*sideResult
	for _, side := range []string{"cold", "pool"} {
		r, err := runSide(ctx, o, side)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-pool: %s: %v\n", side, err)
			return 1
		}
		results = append(results, r)
	}
	text := render(o, results, began, time.Since(began))
	fmt.Print(text)
	if o.Out != "" {
		if err := mdsection.Write(o.Out, o.Section, text); err != nil {
			fmt.Fprintf(os.Stderr, "bench-pool: %v\n", err)
			return 1
		}
	}
	return 0
}

// runSide pushes o.N samples through o.Workers workers, with a warm pool of o.Pool on the pool
// side.
func runSide(ctx context.Context, o options, side string) (*sideResult, error) {
	res := &sideResult{Side: side}
	var mu sync.Mutex
	hits := map[string]bool{}
	observe := func(e orchestrator.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case orchestrator.EventPoolTaken:
			hits[e.Sample] = true
		case orchestrator.EventPoolRefillFailed:
			res.RefillErr++
			fmt.Fprintf(os.Stderr, "  %s: refill failed: %v\n", side, e.Err)
		}
	}
	orc, err := orchestrator.New(orchestrator.WithStateDir(filepath.Join(os.TempDir(), "cbxbench-pool-state")), orchestrator.WithObserver(observe))
	if err != nil {
		return nil, err
	}
	defer orc.Close()
	task, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Name: "cbxbench-pool-" + map[string]string{"cold": "cold", "pool": "warm"}[side], Path: o.Project})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := task.Cleanup(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "  %s: cleanup: %v\n", side, err)
		}
	}()
	if side == "pool" {
		start := time.Now()
		if err := task.Prewarm(ctx, o.Pool); err != nil {
			return nil, err
		}
		for st := task.PoolStatus(); st.Ready < o.Pool; st = task.PoolStatus() {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		res.FillTime = time.Since(start)
		fmt.Fprintf(os.Stderr, "  pool: %d warm in %s\n", o.Pool, res.FillTime.Round(time.Millisecond))
	}
	fmt.Fprintf(os.Stderr, "== %s: %d samples, %d workers\n", side, o.N, o.Workers)
	jobs := make(chan int)
	var wg sync.WaitGroup
	cpu0 := cpuTimes()
	start := time.Now()
	for range o.Workers {
		wg.Go(func() {
			for i := range jobs {
				ready, err := oneSample(ctx, task, fmt.Sprint("s", i), o.Agent)
				mu.Lock()
				if err != nil {
					res.Failed++
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
						fmt.Fprintf(os.Stderr, "  %s: sample %d: %v\n", side, i, err)
					}
				} else {
					res.Done++
					res.ReadyMS = append(res.ReadyMS, ms(ready))
					if hits[fmt.Sprint("s", i)] {
						res.HitMS = append(res.HitMS, ms(ready))
					}
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range o.N {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	res.Wall = time.Since(start)
	res.CPUBusy = cpuTimes().busySince(cpu0)
	res.Hits = len(res.HitMS)
	fmt.Fprintf(os.Stderr, "  %s: %d done, %d failed, %s\n", side, res.Done, res.Failed, res.Wall.Round(time.Millisecond))
	return res, ctx.Err()
}

// oneSample is one runner step: SampleInit, 5 execs (output checked), the agent's turn,
// Cleanup. It returns the time to ready.
func oneSample(ctx context.Context, task *orchestrator.Task, id string, agent time.Duration) (time.Duration, error) {
	t0 := time.Now()
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: id})
	ready := time.Since(t0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.Cleanup(ctx) }()
	for i := range 5 {
		r, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "echo exec-$0", fmt.Sprint(i)}})
		if err != nil {
			return 0, err
		}
		if want := fmt.Sprintf("exec-%d", i); r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != want {
			return 0, fmt.Errorf("exec %d in %s: exit %d, stdout %q", i, s.Project(), r.ExitCode, r.Stdout)
		}
	}
	// The agent thinks: the sample sits idle, as it does while a model generates.
	select {
	case <-time.After(agent):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := s.Cleanup(ctx); err != nil {
		return 0, err
	}
	return ready, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// num prints a figure with two decimals when it is small, none otherwise.
func num(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// cpu is the host's CPU time so far, from /proc/stat: all of it, and the idle part.
type cpu struct{ total, idle float64 }

func cpuTimes() cpu {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpu{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var c cpu
	for i, f := range strings.Fields(line)[1:] {
		var v float64
		if _, err := fmt.Sscan(f, &v); err != nil {
			continue
		}
		c.total += v
		if i == 3 || i == 4 { // idle and iowait
			c.idle += v
		}
	}
	return c
}

// busySince is the share of CPU time since c0 that was not idle.
func (c cpu) busySince(c0 cpu) float64 {
	if d := c.total - c0.total; d > 0 {
		return 1 - (c.idle-c0.idle)/d
	}
	return 0
}

func render(o options, rs []*sideResult, began time.Time, took time.Duration) string {
	cold, pool := rs[0], rs[1]
	var b strings.Builder
	fmt.Fprintf(&b, "### %d workers, %s of agent time, `%s`\n\n", o.Workers, o.Agent, filepath.Base(o.Project))
	fmt.Fprintf(&b, "Run on %s by `make bench-pool` (`go run ./bench/pool -n %d -workers %d -pool %d -agent %s -project %s`); the whole run took %s.",
		began.Format("2006-01-02 15:04 UTC"), o.N, o.Workers, o.Pool, o.Agent, relProject(o.Project), took.Round(time.Second))
	if o.Note != "" {
		fmt.Fprintf(&b, " %s", o.Note)
	}
	fmt.Fprintf(&b, "\n\n%d workers push %d samples of `%s` through, each: `SampleInit`, 5 execs (output checked), %s of simulated agent time, `Sample.Cleanup`. Cold: every `SampleInit` starts its sample. Pool: the task keeps %d warm samples (`Task.Prewarm`, filled before the clock starts: %s); `SampleInit` takes a ready one when there is one. Time to ready is the whole `SampleInit` call, queueing for a start slot included; percentiles are nearest-rank.\n\n",
		o.Workers, o.N, filepath.Base(o.Project), o.Agent, o.Pool, pool.FillTime.Round(time.Millisecond))
	fmt.Fprintf(&b, "| metric | cold | pool of %d | pool / cold | goal |\n|---|---:|---:|---:|---|\n", o.Pool)
	row := func(name string, c, p float64, unit, goal string) {
		ratio := "–"
		switch {
		case c > 0 && p/c < 0.01:
			ratio = "< 0.01×"
		case c > 0:
			ratio = fmt.Sprintf("%.2f×", p/c)
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s %s | %s | %s |\n", name, num(c), unit, num(p), unit, ratio, goal)
	}
	row("time to ready, p50", stats.Percentile(cold.ReadyMS, 50), stats.Percentile(pool.ReadyMS, 50), "ms", "≤ 50 ms from the pool")
	row("time to ready, p95", stats.Percentile(cold.ReadyMS, 95), stats.Percentile(pool.ReadyMS, 95), "ms", "")
	fmt.Fprintf(&b, "| time to ready of pool hits, p50 / p95 | – | %s / %s ms | – | ≤ 50 ms |\n", num(stats.Percentile(pool.HitMS, 50)), num(stats.Percentile(pool.HitMS, 95)))
	row("wall time", cold.Wall.Seconds(), pool.Wall.Seconds(), "s", "≤ 0.8× cold")
	// When the host is saturated, samples leave at the rate the daemon starts them, and the
	// pool saves the starts it made before the clock: the wall time can then fall to about
	// (N - hits)/N of cold, no lower.
	fmt.Fprintf(&b, "| host CPU busy during the run | %.0f%% | %.0f%% | – | |\n", 100*cold.CPUBusy, 100*pool.CPUBusy)
	if pool.Done > 0 && pool.CPUBusy >= 0.9 {
		fmt.Fprintf(&b, "| bound on a saturated host, (N − hits) / N | – | – | %.2f× | |\n", float64(pool.Done-pool.Hits)/float64(pool.Done))
	}
	fmt.Fprintf(&b, "| SampleInits served by the pool | – | %d of %d | – | |\n", pool.Hits, pool.Done)
	fmt.Fprintf(&b, "| samples done / failed | %d / %d | %d / %d | – | no failure |\n", cold.Done, cold.Failed, pool.Done, pool.Failed)
	fmt.Fprintf(&b, "| failed refills | – | %d | – | none fails a sample |\n", pool.RefillErr)
	for _, r := range rs {
		if r.FirstErr != "" {
			fmt.Fprintf(&b, "\nFirst error (%s): `%s`\n", r.Side, r.FirstErr)
		}
	}
	return b.String()
}

// relProject is the project's path relative to the working directory, as the command line
// gave it.
func relProject(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil {
			return r
		}
	}
	return p
}
