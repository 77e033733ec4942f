// Command startup is the CLI start-up benchmark (`make bench-startup`): `composebox exec` as a
// process against `docker exec` on the same container, side by side in one run. Each round runs
// every contender once, in an order that rotates from round to round, so that the load of the
// moment weighs on all of them alike; the figures are medians and 90th percentiles of the wall
// time from fork to exit.
//
// Contenders:
//   - `composebox exec -p P true` with the binary under test (-bin);
//   - `docker exec CONTAINER true` on the container of that sample's default service;
//   - with -baseline (repeatable), the same exec with other composebox binaries (a previous
//     build, an experiment);
//   - the process floor: `composebox version` and `docker --version`, neither of which talks
//     to the engine.
//
// Then the package initialisation before main: `GODEBUG=inittrace=1 composebox version`, run
// -init-runs times, with the median of each package's clock time and of their sum.
//
// The sample is one of bench/projects/two-service, started with the binary's own `up` in a
// private state directory and removed with its `down`, also on SIGINT/SIGTERM.
//
// Usage:
//
//	startup [-bin bin/composebox] [-baseline [LABEL=]BIN]... [-rounds 30] [-out bench/RESULTS.md]
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/composebox/composebox/bench/internal/mdsection"
	"github.com/composebox/composebox/bench/internal/stats"
)

type options struct {
	Bin       string
	Baselines []string
	Project   string
	Rounds    int
	Warmup    int
	InitRuns  int
	Out       string
	Section   string
}

// contender is one command line measured each round.
type contender struct {
	name string
	argv []string
	env  []string
	// floor marks the process-start contenders, which do not talk to the engine.
	floor bool
	times []float64 // wall, ms
	cpu   []float64 // the process's own user+system CPU, ms
}

func main() {
	var o options
	flag.StringVar(&o.Bin, "bin", "bin/composebox", "the composebox binary under test")
	flag.Func("baseline", "another composebox binary to measure beside it, as PATH or LABEL=PATH (e.g. a previous build); repeatable", func(v string) error {
		o.Baselines = append(o.Baselines, v)
		return nil
	})
	flag.StringVar(&o.Project, "project", "bench/projects/two-service", "the task the sample runs")
	flag.IntVar(&o.Rounds, "rounds", 30, "rounds; each runs every contender once")
	flag.IntVar(&o.Warmup, "warmup", 3, "unmeasured rounds first")
	flag.IntVar(&o.InitRuns, "init-runs", 15, "runs of GODEBUG=inittrace=1 composebox version")
	flag.StringVar(&o.Out, "out", "bench/RESULTS.md", "Markdown file whose section this run replaces (empty: print only)")
	flag.StringVar(&o.Section, "section", "bench-startup", "the section's name in -out")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench startup:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	started := time.Now()
	bin, err := filepath.Abs(o.Bin)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("the docker CLI is the baseline and is not on PATH")
	}
	state, err := os.MkdirTemp("", "cbxbench-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	env := append(os.Environ(), "COMPOSEBOX_STATE_DIR="+state)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	up := exec.CommandContext(ctx, bin, "up", "--progress", "none", o.Project)
	up.Env, up.Stderr = env, os.Stderr
	out, err := up.Output()
	if err != nil {
		return fmt.Errorf("up %s: %w", o.Project, err)
	}
	project := strings.TrimSpace(string(out))
	defer func() {
		down := exec.Command(bin, "down", project)
		down.Env, down.Stderr = env, os.Stderr
		if err := down.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "bench startup: down %s: %v\n", project, err)
		}
	}()
	ctr, err := defaultContainer(ctx, bin, env, project)
	if err != nil {
		return err
	}
	loadStart := loadAvg()

	cs := []*contender{
		{name: "composebox exec -p P true", argv: []string{bin, "exec", "-p", project, "true"}, env: env},
		{name: "docker exec CONTAINER true", argv: []string{"docker", "exec", ctr, "true"}},
	}
	for _, b := range o.Baselines {
		label, path, ok := strings.Cut(b, "=")
		if !ok {
			label, path = "baseline", b
		}
		base, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		cs = append(cs, &contender{name: label + ": composebox exec -p P true", argv: []string{base, "exec", "-p", project, "true"}, env: env})
	}
	cs = append(cs,
		&contender{name: "composebox version", argv: []string{bin, "version"}, env: env, floor: true},
		&contender{name: "docker --version", argv: []string{"docker", "--version"}, floor: true})
	for r := -o.Warmup; r < o.Rounds; r++ {
		for i := range cs {
			c := cs[(i+max(r, 0))%len(cs)]
			d, cpu, err := timeRun(ctx, c)
			if err != nil {
				return err
			}
			if r >= 0 {
				c.times = append(c.times, d)
				c.cpu = append(c.cpu, cpu)
			}
		}
	}
	inits, err := initTrace(ctx, bin, env, o.InitRuns)
	if err != nil {
		return err
	}
	size, err := os.Stat(bin)
	if err != nil {
		return err
	}
	text := report(o, cs, inits, size.Size(), loadStart, time.Since(started))
	fmt.Print(text)
	if o.Out != "" {
		return mdsection.Write(o.Out, o.Section, text)
	}
	return nil
}

// timeRun runs c once and returns its wall time and its own CPU time (user and system) in ms;
// a failure is an error with its output.
func timeRun(ctx context.Context, c *contender) (float64, float64, error) {
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	if c.env != nil {
		cmd.Env = c.env
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w\n%s", c.name, err, out.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return float64(d.Microseconds()) / 1000, float64(cpu.Microseconds()) / 1000, nil
}

// defaultContainer is the ID of the container of the sample's default service.
func defaultContainer(ctx context.Context, bin string, env []string, project string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "--json", "ps", "-p", project)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ps -p %s: %w", project, err)
	}
	var doc struct {
		Services []struct {
			Service   string `json:"service"`
			Container string `json:"container"`
			Default   bool   `json:"default"`
		} `json:"services"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return "", fmt.Errorf("ps --json: %w: %s", err, out)
	}
	for _, s := range doc.Services {
		if s.Default || s.Service == "default" {
			return s.Container, nil
		}
	}
	return "", fmt.Errorf("ps --json: no default service in %s", out)
}

// initLine is one line of GODEBUG=inittrace=1: "init PKG @T ms, C ms clock, ...".
var initLine = regexp.MustCompile(`^init (\S+) @\S+ ms, ([0-9.]+) ms clock`)

// initCost is one package's initialisation, or (pkg "") the sum of all of them.
type initCost struct {
	pkg    string
	median float64
}

// initTrace runs `composebox version` with the init trace n times and returns the median sum
// of the packages' clock times, then the packages by their median clock, largest first.
func initTrace(ctx context.Context, bin string, env []string, n int) ([]initCost, error) {
	per := map[string][]float64{}
	var sums []float64
	for range n {
		cmd := exec.CommandContext(ctx, bin, "version")
		cmd.Env = append(slices.Clone(env), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("inittrace: %w\n%s", err, stderr.String())
		}
		sum := 0.0
		seen := map[string]float64{}
		for line := range strings.SplitSeq(stderr.String(), "\n") {
			m := initLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			ms, _ := strconv.ParseFloat(m[2], 64)
			seen[m[1]] += ms
			sum += ms
		}
		for pkg, ms := range seen {
			per[pkg] = append(per[pkg], ms)
		}
		sums = append(sums, sum)
	}
	out := []initCost{{median: stats.Percentile(sums, 50)}}
	for pkg, xs := range per {
		for len(xs) < n {
			xs = append(xs, 0)
		}
		out = append(out, initCost{pkg: pkg, median: stats.Percentile(xs, 50)})
	}
	slices.SortFunc(out[1:], func(a, b initCost) int { return cmp.Or(cmp.Compare(b.median, a.median), strings.Compare(a.pkg, b.pkg)) })
	return out, nil
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func engineVersion() string {
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func report(o options, cs []*contender, inits []initCost, size int64, loadStart string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## CLI start-up (`make bench-startup`)\n\n")
	fmt.Fprintf(&b, "Run on %s by `make bench-startup` (`bench/startup`); the run took %.0f s. %d CPUs, Docker Engine %s, %s; 1-minute load average %s at the start, %s at the end (other work shares this host).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Seconds(), runtime.NumCPU(), engineVersion(), runtime.Version(),
		strings.Fields(loadStart)[0], strings.Fields(loadAvg() + " ?")[0])
	fmt.Fprintf(&b, "%d rounds after %d warm-up rounds; each round runs every command once, in an order that rotates, on one sample of `%s`. Wall time from fork to exit, and the process's own CPU time (user and system; the engine's work is not in it), ms. The binary under test is %.1f MiB.\n\n",
		o.Rounds, o.Warmup, o.Project, float64(size)/(1<<20))
	ref := map[bool]*contender{}
	for _, c := range cs {
		if strings.HasPrefix(c.name, "docker") {
			ref[c.floor] = c
		}
	}
	fmt.Fprintf(&b, "| command | wall p10 ms | wall p50 ms | wall p90 ms | p10 / docker's | p50 / docker's | own CPU p50 ms | CPU / docker's |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cs {
		d := ref[c.floor]
		p10, p50 := stats.Percentile(c.times, 10), stats.Percentile(c.times, 50)
		cpu := stats.Percentile(c.cpu, 50)
		fmt.Fprintf(&b, "| `%s` | %.1f | %.1f | %.1f | %.2f× | %.2f× | %.1f | %.2f× |\n", c.name, p10, p50, stats.Percentile(c.times, 90),
			p10/stats.Percentile(d.times, 10), p50/stats.Percentile(d.times, 50), cpu, cpu/stats.Percentile(d.cpu, 50))
	}
	var sizes []string
	for _, c := range cs {
		if !c.floor && !strings.HasPrefix(c.name, "docker") {
			if fi, err := os.Stat(c.argv[0]); err == nil {
				label := cmp.Or(strings.TrimSuffix(strings.TrimSuffix(c.name, "composebox exec -p P true"), ": "), "under test")
				sizes = append(sizes, fmt.Sprintf("%s %.1f MiB", label, float64(fi.Size())/(1<<20)))
			}
		}
	}
	fmt.Fprintf(&b, "\nBinaries: %s.\n", strings.Join(sizes, "; "))
	ratio := stats.Percentile(cs[0].times, 50) / stats.Percentile(cs[1].times, 50)
	verdict := "**met**"
	if ratio > 1.1 {
		verdict = "**not met**"
	}
	fmt.Fprintf(&b, "\nGoal: `composebox exec` at most 1.1× `docker exec` (p50): %.2f×, %s (p10, the runs the rest of the machine disturbed least: %.2f×).\n\n",
		ratio, verdict, stats.Percentile(cs[0].times, 10)/stats.Percentile(cs[1].times, 10))
	fmt.Fprintf(&b, "Package initialisation before `main` (`GODEBUG=inittrace=1 composebox version`, median of %d runs): %.1f ms in all; the largest:\n\n", o.InitRuns, inits[0].median)
	fmt.Fprintf(&b, "| package | ms (median) |\n|---|---:|\n")
	for _, c := range inits[1:min(len(inits), 9)] {
		fmt.Fprintf(&b, "| `%s` | %.2f |\n", c.pkg, c.median)
	}
	fmt.Fprintf(&b, "\nRerun: `make bench-startup` (about a minute; not part of `make test`). It replaces this section and keeps the rest of the file.\n")
	return b.String()
}
