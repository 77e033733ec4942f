// Command scale is composebox's scale benchmark (`make bench`). In one run it measures,
// side by side, the composebox library against a baseline that drives the compose CLI one
// process per operation, the way the Python harnesses do:
//
//  1. throughput: N samples of testdata/projects/multi-service, each init, 5 execs, a 1 MiB
//     write and read, and cleanup, at a fixed concurrency; samples per minute;
//  2. capacity: two-service samples (bench/projects/two-service: no explicit IPAM, 30 s
//     healthchecks) started until a target number is live or one fails; the count and the
//     first error;
//  3. latency: p50 and p95 of SampleInit-to-ready against `compose up --wait`, and of Exec
//     (`true`) against `docker exec` (and `compose exec`);
//  4. the peak RSS of the composebox process at the capacity target;
//  5. floor: a bare Engine API client doing one sample's whole work (bench/projects/floor by
//     hand) against composebox doing it through the library, batches alternating; samples per
//     minute, each step's time, and exec latency against the bare create/attach/inspect
//     (floor.go). `-phases floor` runs it alone (`make bench-floor`).
//
// Usage:
//
//	scale [flags]        run every phase and print the table (bench/run.sh is the wrapper)
//	scale cleanup        remove everything a benchmark run left behind, by label
//
// Each phase runs in a child process of this program (`scale phase NAME`), so that the peak
// RSS of the composebox capacity phase is that phase's own. Every container, network and volume
// the benchmark creates carries dev.composebox.managed=true and one of the task labels in
// benchTasks; the parent sweeps them after every phase, on the way out, and on SIGINT/SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// options are the benchmark's settings. The parent passes them to its phase children as JSON in
// optionsEnv.
type options struct {
	N                   int           `json:"n"`
	Concurrency         int           `json:"concurrency"`
	Capacity            int           `json:"capacity"`
	CapacityConcurrency int           `json:"capacity_concurrency"`
	InitRounds          int           `json:"init_rounds"`
	ExecRounds          int           `json:"exec_rounds"`
	Compose             string        `json:"compose"`
	Project             string        `json:"project"`
	CapacityProject     string        `json:"capacity_project"`
	Phases              string        `json:"phases"`
	Out                 string        `json:"out"`
	Machine             string        `json:"machine"`
	Budget              time.Duration `json:"budget"`
	FloorN              int           `json:"floor_n"`
	FloorConcurrency    int           `json:"floor_concurrency"`
	FloorRounds         int           `json:"floor_rounds"`
	FloorExecRounds     int           `json:"floor_exec_rounds"`
	FloorProject        string        `json:"floor_project"`
	Profile             string        `json:"profile"`
	// Args are the program's arguments, for the report.
	Args []string `json:"args,omitempty"`

	// Set by the parent for its children.
	Work      string   `json:"work"`
	StateDir  string   `json:"state_dir"`
	BaseImage string   `json:"base_image"`
	WebImage  string   `json:"web_image"`
	Baseline  baseInfo `json:"baseline"`
	// Deadline is when the phase's measured work must stop (its teardown comes after).
	Deadline time.Time `json:"deadline"`
}

const optionsEnv = "CBXBENCH_OPTIONS"

// Labels and task names of everything the benchmark creates. composebox stamps the task label
// itself; the baseline's override files add the same labels to its containers and networks.
const (
	taskCbx      = "cbxbench"     // composebox, multi-service (throughput, latency)
	taskCbxCap   = "cbxbench-cap" // composebox, capacity
	taskCLI      = "cbxbench-cli" // baseline, every phase
	benchWebRepo = "cbxbench/web"
)

var benchTasks = []string{taskCbx, taskCbxCap, taskCLI, taskFloor}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "phase":
			if len(args) != 2 {
				fmt.Fprintln(os.Stderr, "usage: scale phase NAME")
				return 2
			}
			return runPhaseChild(ctx, args[1])
		case "cleanup":
			return runCleanupCmd(ctx)
		}
	}
	var o options
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.IntVar(&o.N, "n", 100, "throughput: samples per side")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "throughput: samples in flight per side")
	fs.IntVar(&o.Capacity, "capacity", 250, "capacity: live samples to reach per side")
	fs.IntVar(&o.CapacityConcurrency, "capacity-concurrency", 8, "capacity: samples started at once per side")
	fs.IntVar(&o.InitRounds, "init-rounds", 20, "latency: SampleInit / up --wait rounds")
	fs.IntVar(&o.ExecRounds, "exec-rounds", 60, "latency: exec rounds")
	fs.StringVar(&o.Compose, "compose", "bin/docker-compose-v2", "baseline compose CLI (compose v2 binary, else docker-compose v1)")
	fs.StringVar(&o.Project, "project", "testdata/projects/multi-service", "throughput and latency project")
	fs.StringVar(&o.CapacityProject, "capacity-project", "bench/projects/two-service", "capacity project")
	fs.IntVar(&o.FloorN, "floor-n", 48, "floor: samples per batch")
	fs.IntVar(&o.FloorConcurrency, "floor-concurrency", 16, "floor: samples in flight per batch")
	fs.IntVar(&o.FloorRounds, "floor-rounds", 3, "floor: rounds of one batch per side")
	fs.IntVar(&o.FloorExecRounds, "floor-exec-rounds", 100, "floor: exec latency rounds")
	fs.StringVar(&o.FloorProject, "floor-project", "bench/projects/floor", "floor: composebox's project (the bare client does the same by hand)")
	fs.StringVar(&o.Profile, "profile", "", "floor: write CPU profiles of each batch and block and mutex profiles of composebox's batches into this directory")
	fs.StringVar(&o.Phases, "phases", "capacity,throughput,floor,latency", "phases to run, comma-separated")
	fs.StringVar(&o.Out, "out", "", "also write the results as Markdown to this file")
	fs.StringVar(&o.Machine, "machine", "", "file with the machine description for the Markdown")
	fs.DurationVar(&o.Budget, "budget", 24*time.Minute, "time for the measured work of all phases; each phase must stop by its cumulative share")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.Args = args
	for _, p := range []*string{&o.Compose, &o.Project, &o.CapacityProject, &o.FloorProject, &o.Profile} {
		if *p == "" {
			continue
		}
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	if err := runAll(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	return 0
}

// runPhaseChild runs one phase with the options its parent passed, and prints its result as
// JSON on stdout.
func runPhaseChild(ctx context.Context, name string) int {
	var o options
	if err := json.Unmarshal([]byte(os.Getenv(optionsEnv)), &o); err != nil {
		fmt.Fprintf(os.Stderr, "phase %s: options: %v\n", name, err)
		return 2
	}
	res, err := runPhase(ctx, name, o)
	if res != nil {
		if jerr := json.NewEncoder(os.Stdout).Encode(res); jerr != nil {
			fmt.Fprintf(os.Stderr, "phase %s: %v\n", name, jerr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "phase %s: %v\n", name, err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	return 0
}

func runPhase(ctx context.Context, name string, o options) (any, error) {
	switch name {
	case "throughput-composebox":
		return throughputCbx(ctx, o)
	case "throughput-baseline":
		return throughputCLI(ctx, o)
	case "capacity-composebox":
		return capacityCbx(ctx, o)
	case "capacity-baseline":
		return capacityCLI(ctx, o)
	case "latency":
		return latencyBoth(ctx, o)
	case "floor":
		return floorBoth(ctx, o)
	}
	return nil, fmt.Errorf("unknown phase %q", name)
}

// runCleanupCmd removes every resource of a benchmark run, and the images it built.
func runCleanupCmd(ctx context.Context) int {
	c, err := connect(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench cleanup:", err)
		return 1
	}
	defer c.Close()
	// Even after Ctrl-C: this is the cleanup.
	ctx = context.WithoutCancel(ctx)
	n, err := sweep(ctx, c)
	removeBenchImages(ctx, c)
	if n > 0 {
		fmt.Fprintf(os.Stderr, "bench cleanup: removed %d leftover project(s)\n", n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench cleanup:", err)
		return 1
	}
	return 0
}
