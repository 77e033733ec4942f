package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/images"
)

// results is everything the phases measured.
type results struct {
	Opts    options
	Started time.Time
	Wall    time.Duration
	TPCbx   *throughputResult
	TPCLI   *throughputResult
	CapCbx  *capacityResult
	CapCLI  *capacityResult
	Latency *latencyResult
	Floor   *floorResult
	// FloorWall is how long the floor phase took.
	FloorWall time.Duration
	Args      []string
	Problems  []string
	// Loads is the 1-minute load average as each phase started: the machine is shared.
	Loads []string
}

// loadAverage is the 1-minute load average, from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// runAll prepares the images, runs the phases one after another, each in a child process,
// sweeps the engine after each, and prints (and writes) the report. Whatever happens, it ends
// with a sweep.
func runAll(ctx context.Context, o options) (err error) {
	r := &results{Started: time.Now()}
	c, err := connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	work, err := os.MkdirTemp("", "cbxbench-")
	if err != nil {
		return err
	}
	o.Work = work
	o.StateDir = filepath.Join(work, "state")
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		fmt.Fprintln(os.Stderr, "== cleanup")
		if _, serr := sweep(dctx, c); serr != nil {
			err = errors.Join(err, serr)
		}
		removeBenchImages(dctx, c)
		if left, lerr := strays(dctx, c); lerr == nil && !left.empty() {
			err = errors.Join(err, fmt.Errorf("left behind: %s", left))
		}
		_ = os.RemoveAll(work)
	}()

	// Leftovers of an interrupted earlier run would skew the numbers.
	if n, err := sweep(ctx, c); err != nil {
		return err
	} else if n > 0 {
		fmt.Fprintf(os.Stderr, "removed %d project(s) left by an earlier run\n", n)
	}
	phases := map[string]bool{}
	for _, p := range strings.Split(o.Phases, ",") {
		phases[strings.TrimSpace(p)] = true
	}
	// The floor phase alone needs no compose CLI and no web image.
	if phases["capacity"] || phases["throughput"] || phases["latency"] {
		if o.Baseline, err = probeBaseline(ctx, o.Compose); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "baseline: %s\n", o.Baseline.Name())
	}
	if o.BaseImage, err = images.NewBuilder(c).Base(ctx); err != nil {
		return fmt.Errorf("base image: %w", err)
	}
	if phases["throughput"] || phases["latency"] {
		if o.WebImage, err = buildWeb(ctx, o); err != nil {
			return err
		}
	}
	r.Opts = o
	// Each phase's work must end by its cumulative share of the budget, so that time a phase
	// does not use goes to the next, and the whole run stays within the budget.
	var total float64
	for _, p := range phaseOrder {
		if phases[p.group] {
			total += p.weight
		}
	}
	if total == 0 {
		return fmt.Errorf("no phase selected by -phases %q (capacity, throughput, floor, latency)", o.Phases)
	}
	var cum float64
	step := func(name string, out any) {
		if ctx.Err() != nil {
			return
		}
		o.Deadline = r.Started.Add(time.Duration(float64(o.Budget) * cum / total))
		load := loadAverage()
		r.Loads = append(r.Loads, fmt.Sprintf("%s %s", name, load))
		fmt.Fprintf(os.Stderr, "== %s (at %s, until %s; load average %s)\n", name, time.Since(r.Started).Round(time.Second), o.Deadline.Sub(r.Started).Round(time.Second), load)
		t0 := time.Now()
		err := runChild(ctx, name, o, out)
		if name == "floor" {
			r.FloorWall = time.Since(t0)
		}
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", name, err))
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
		// Every phase starts from an engine without benchmark resources.
		if n, err := sweep(ctx, c); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("sweep after %s: %v", name, err))
		} else if n > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s left %d project(s) behind (removed by the sweep)", name, n))
		}
	}
	for _, p := range phaseOrder {
		if phases[p.group] {
			cum += p.weight
			step(p.name, p.result(r))
		}
	}
	r.Wall = time.Since(r.Started)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	machine := ""
	if o.Machine != "" {
		if b, err := os.ReadFile(o.Machine); err == nil {
			machine = string(b)
		}
	}
	floorOnly := len(phases) == 1 && phases["floor"]
	if !floorOnly {
		fmt.Print(renderText(r))
	}
	if r.Floor != nil {
		fmt.Print(floorText(r))
	}
	if o.Out == "" {
		return nil
	}
	if !floorOnly {
		if err := os.WriteFile(o.Out, []byte(renderMarkdown(r, machine)+keptSections(o.Out)), 0o644); err != nil {
			return err
		}
	}
	if r.Floor != nil {
		// The full run's rewrite kept the floor section's heading and prose; its figures go
		// between the markers.
		if err := writeFloorSection(o.Out, renderFloor(r, machine)); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", o.Out)
	return nil
}

// phaseOrder is the phases in the order they run, with their shares of the time budget (in
// proportion to what each took on this project's 2-core machine, teardown included).
// Capacity runs first, on a quiet engine: the baseline's count is bounded by the address pools
// (each wave waits out the 30 s healthcheck interval), composebox's by the target; composebox's
// share includes tearing down 250 samples. Latency runs last: if the run is late, it gets fewer
// rounds, which still give valid percentiles.
var phaseOrder = []struct {
	name, group string
	weight      float64
	// result makes the phase's slot in the results, which the child's output fills.
	result func(r *results) any
}{
	{"capacity-baseline", "capacity", 0.14, func(r *results) any { r.CapCLI = &capacityResult{}; return r.CapCLI }},
	{"capacity-composebox", "capacity", 0.39, func(r *results) any { r.CapCbx = &capacityResult{}; return r.CapCbx }},
	{"throughput-composebox", "throughput", 0.145, func(r *results) any { r.TPCbx = &throughputResult{}; return r.TPCbx }},
	{"throughput-baseline", "throughput", 0.195, func(r *results) any { r.TPCLI = &throughputResult{}; return r.TPCLI }},
	{"floor", "floor", 0.33, func(r *results) any { r.Floor = &floorResult{}; return r.Floor }},
	{"latency", "latency", 0.13, func(r *results) any { r.Latency = &latencyResult{}; return r.Latency }},
}

// runChild runs `scale phase NAME` and decodes its JSON result into out. On SIGINT/SIGTERM
// the child gets SIGTERM and time to clean up.
func runChild(ctx context.Context, name string, o options, out any) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	opts, err := json.Marshal(o)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "phase", name)
	cmd.Env = append(os.Environ(), optionsEnv+"="+string(opts))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 4 * time.Minute
	runErr := cmd.Run()
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			return errors.Join(runErr, fmt.Errorf("result: %w", err))
		}
	}
	return runErr
}

// buildWeb builds multi-service's `web` once for the baseline, under a fixed tag, with the
// docker CLI (composebox builds its own once per task, in TaskInit).
func buildWeb(ctx context.Context, o options) (string, error) {
	tag := benchWebRepo + ":scale"
	cmd := exec.CommandContext(ctx, "docker", "build", "-q", "-t", tag,
		"--label", labels.LabelBench+"=scale", "--build-arg", "BASE="+o.BaseImage, filepath.Join(o.Project, "web"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s for the baseline: %w: %s", tag, err, strings.TrimSpace(string(out)))
	}
	return tag, nil
}

// keptSections is what a rewrite of path keeps of it: the sections other benchmarks write into
// the same file, which this one did not measure. They come after this one's: `make
// bench-floor`'s (its heading and prose, its figures between markers), `make bench-pool`'s (its
// heading, its runs between their markers, and their reading) and `make bench-api`'s;
// everything from the first of them to the end of the file is kept.
func keptSections(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s, first := string(b), -1
	for _, head := range []string{floorHeading, "<!-- " + floorSection, poolSection, "<!-- bench-pool", apiSection} {
		if i := strings.Index(s, "\n"+head); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		return ""
	}
	return "\n" + strings.TrimRight(s[first+1:], "\n") + "\n"
}

// poolSection heads the section `make bench-pool` writes into the same results file.
const poolSection = "## Warm pools"

// apiSection heads the section `make bench-api` writes into the same results file.
const apiSection = "## Server and Python client\n"
