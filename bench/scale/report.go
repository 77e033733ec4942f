package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/composebox/composebox/bench/internal/stats"
)

// row is one line of the results table. ours and theirs are numbers (NaN-free); a row with no
// baseline figure has hasTheirs false.
type row struct {
	metric      string
	ours        float64
	theirs      float64
	hasTheirs   bool
	unit        string
	higherIsBad bool // lower is better (latency, memory)
	oursNote    string
}

func (r row) ratio() string {
	if !r.hasTheirs || r.theirs == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", r.ours/r.theirs)
}

func (r row) better() string {
	if !r.hasTheirs {
		return ""
	}
	if r.higherIsBad {
		return "lower is better"
	}
	return "higher is better"
}

func num(v float64, unit string) string {
	switch {
	case unit == "MiB":
		return fmt.Sprintf("%.0f MiB", v)
	case v >= 100 || v == float64(int64(v)):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func (r row) oursText() string {
	s := num(r.ours, r.unit)
	if r.oursNote != "" {
		s += " " + r.oursNote
	}
	return s
}

func (r row) theirsText() string {
	if !r.hasTheirs {
		return "—"
	}
	return num(r.theirs, r.unit)
}

func rows(r *results) []row {
	var out []row
	if r.TPCbx != nil && r.TPCLI != nil {
		out = append(out, row{
			metric: fmt.Sprintf("throughput, samples/min (N=%d, %d at once)", r.Opts.N, r.Opts.Concurrency),
			ours:   r.TPCbx.PerMin, theirs: r.TPCLI.PerMin, hasTheirs: true,
		})
	}
	if r.CapCbx != nil && r.CapCLI != nil {
		out = append(out, row{
			metric: fmt.Sprintf("capacity, live two-service samples (target %d)", r.Opts.Capacity),
			ours:   float64(r.CapCbx.Live), theirs: float64(r.CapCLI.Live), hasTheirs: true,
		})
	}
	if l := r.Latency; l != nil {
		out = append(out,
			row{metric: "SampleInit-to-ready vs up --wait, p50 ms", ours: stats.Percentile(l.InitCbx, 50), theirs: stats.Percentile(l.InitCLI, 50), hasTheirs: true, higherIsBad: true},
			row{metric: "SampleInit-to-ready vs up --wait, p95 ms", ours: stats.Percentile(l.InitCbx, 95), theirs: stats.Percentile(l.InitCLI, 95), hasTheirs: true, higherIsBad: true},
			row{metric: "Exec(true) vs docker exec, p50 ms", ours: stats.Percentile(l.ExecCbx, 50), theirs: stats.Percentile(l.ExecDocker, 50), hasTheirs: true, higherIsBad: true},
			row{metric: "Exec(true) vs docker exec, p95 ms", ours: stats.Percentile(l.ExecCbx, 95), theirs: stats.Percentile(l.ExecDocker, 95), hasTheirs: true, higherIsBad: true},
			row{metric: "Exec(true) vs compose exec -T, p50 ms", ours: stats.Percentile(l.ExecCbx, 50), theirs: stats.Percentile(l.ExecCompose, 50), hasTheirs: true, higherIsBad: true},
		)
	}
	if c := r.CapCbx; c != nil {
		out = append(out, row{
			metric: fmt.Sprintf("peak RSS of the composebox process at %d live samples", c.Live),
			ours:   float64(c.PeakRSSKB) / 1024, unit: "MiB", higherIsBad: true,
		})
	}
	return out
}

// details are the figures behind the table, one line each.
func details(r *results) []string {
	var d []string
	side := func(name string, t *throughputResult) {
		if t == nil {
			return
		}
		s := fmt.Sprintf("throughput %s: %d/%d samples done in %.1f s (%.1f/min), %d failed; per sample p50 %.0f ms, p95 %.0f ms",
			name, t.Done, t.Samples, t.WallS, t.PerMin, t.Failed, stats.Percentile(t.SampleMS, 50), stats.Percentile(t.SampleMS, 95))
		s += fmt.Sprintf(" (p50 of the steps: ready %.0f ms, 5 execs %.0f ms, 1 MiB write+read %.0f ms, teardown %.0f ms)",
			stats.Percentile(t.InitMS, 50), stats.Percentile(t.ExecMS, 50), stats.Percentile(t.FileMS, 50), stats.Percentile(t.TeardownMS, 50))
		if t.PeakRSSKB > 0 {
			s += fmt.Sprintf("; peak RSS %.0f MiB", float64(t.PeakRSSKB)/1024)
		}
		if t.TimedOut {
			s += "; STOPPED at its share of the time budget"
		}
		if t.FirstErr != "" {
			s += "; first error: " + t.FirstErr
		}
		d = append(d, s)
	}
	side("composebox", r.TPCbx)
	side("baseline", r.TPCLI)
	capSide := func(name string, c *capacityResult) {
		if c == nil {
			return
		}
		s := fmt.Sprintf("capacity %s: %d live of %d started (target %d) in %.1f s", name, c.Live, c.Attempted, c.Target, c.FillS)
		if c.Live > 0 {
			s += fmt.Sprintf("; exec `true` answered in %d/%d (p50 %.0f ms, %d at once)", c.ExecOK, c.Live, stats.Percentile(c.ExecMS, 50), r.Opts.CapacityConcurrency)
		}
		s += fmt.Sprintf("; teardown of all %d: %.1f s", c.Live, c.TeardownS)
		if c.Subnets != "" {
			s += "; subnets: " + c.Subnets
		}
		if c.PeakRSSKB > 0 {
			s += fmt.Sprintf("; RSS at %d live %.0f MiB (peak %.0f MiB)", c.Live, float64(c.RSSKB)/1024, float64(c.PeakRSSKB)/1024)
		}
		if c.TimedOut {
			s += "; STOPPED at its share of the time budget"
		}
		first := c.FirstErr
		if first == "" {
			first = "none"
		}
		s += "; first error: " + first
		if c.TeardownErr != "" {
			s += "; teardown error: " + c.TeardownErr
		}
		d = append(d, s)
	}
	capSide("composebox", r.CapCbx)
	capSide("baseline", r.CapCLI)
	if l := r.Latency; l != nil {
		d = append(d, fmt.Sprintf("latency: %d/%d SampleInit and %d/%d up --wait rounds, %d exec rounds (composebox %d, docker exec %d, compose exec %d ok), one operation at a time, sides alternating; compose exec p95 %.0f ms",
			len(l.InitCbx), r.Opts.InitRounds, len(l.InitCLI), r.Opts.InitRounds, r.Opts.ExecRounds, len(l.ExecCbx), len(l.ExecDocker), len(l.ExecCompose), stats.Percentile(l.ExecCompose, 95)))
		if l.FirstErr != "" {
			d = append(d, fmt.Sprintf("latency: %d failures, first: %s", l.Failures, l.FirstErr))
		}
	}
	if len(r.Loads) > 0 {
		d = append(d, "1-minute load average as each phase started (2 CPUs; it counts the previous phase's tail and anything else running on the machine): "+strings.Join(r.Loads, ", "))
	}
	for _, p := range r.Problems {
		d = append(d, "problem: "+p)
	}
	return d
}

const verdict = "Ratios are composebox / baseline: above 1 is better for throughput and capacity, below 1 is better for latency."

func renderText(r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\ncomposebox scale benchmark, %s, baseline: %s\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.Opts.Baseline.Name())
	fmt.Fprintf(&b, "%-56s %12s %12s %8s  %s\n", "metric", "composebox", "baseline", "ratio", "")
	for _, x := range rows(r) {
		fmt.Fprintf(&b, "%-56s %12s %12s %8s  %s\n", x.metric, x.oursText(), x.theirsText(), x.ratio(), x.better())
	}
	fmt.Fprintf(&b, "\n%s\n\n", verdict)
	for _, d := range details(r) {
		fmt.Fprintf(&b, "- %s\n", d)
	}
	fmt.Fprintf(&b, "\nwhole run: %s\n", r.Wall.Round(time.Second))
	return b.String()
}

func renderMarkdown(r *results, machine string) string {
	var b strings.Builder
	b.WriteString("# `make bench` results\n\n")
	fmt.Fprintf(&b, "Run on %s by `make bench` (`bench/run.sh`, program `bench/scale`); the whole run took %s.\n\n",
		r.Started.Format("2006-01-02 15:04 MST"), r.Wall.Round(time.Second))
	if machine != "" {
		b.WriteString("## Machine\n\n```\n")
		b.WriteString(strings.TrimRight(machine, "\n"))
		b.WriteString("\n```\n\n")
	}
	fmt.Fprintf(&b, "Baseline: %s, one CLI process per operation (`up -d --wait`, `exec -T` ×5, `cp` in and out, `down -v -t 1`), and the `docker` CLI for `docker exec`.\n\n", r.Opts.Baseline.Name())
	b.WriteString("## Results\n\n")
	b.WriteString("| metric | composebox | baseline | composebox / baseline | |\n|---|---:|---:|---:|---|\n")
	for _, x := range rows(r) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.metric, x.oursText(), x.theirsText(), x.ratio(), x.better())
	}
	fmt.Fprintf(&b, "\n%s\n\n", verdict)
	b.WriteString("## Details\n\n")
	for _, d := range details(r) {
		fmt.Fprintf(&b, "- %s\n", d)
	}
	b.WriteString("\n## What was measured\n\n")
	fmt.Fprintf(&b, `- **throughput**: %d samples of `+"`testdata/projects/multi-service`"+` per side, %d in flight. Each sample: start and wait until ready, 5 execs of `+"`sh -c 'echo exec-N'`"+` (output checked), write and read back 1 MiB at %s (bytes compared), tear down. composebox: `+"`SampleInit`"+`, `+"`Sandbox.Exec`"+` ×5, `+"`WriteFile`"+`/`+"`ReadFile`"+`, `+"`Sample.Cleanup`"+` in one process, after one `+"`TaskInit`"+` (which builds `+"`web`"+`). Baseline: one CLI process per operation, with `+"`web`"+` built once beforehand under a fixed tag named in an override file. Samples/min = samples completed / wall time of the whole batch. composebox queues starts beyond its own bound (`+"`Limits.Starts`"+`, 2 × CPUs by default), so most of its "ready" step is waiting for a start slot; the baseline starts all 16 at once and lets the daemon queue them.
- **capacity**: `+"`bench/projects/two-service`"+` (two services on the base image, no IPAM in the file, healthchecks every 30 s) started %d at a time until %d are live or one fails; then `+"`true`"+` is exec'd in every live sample, and all are torn down (composebox: `+"`Task.Cleanup`"+`; baseline: `+"`down -v -t 1`"+`, as many at once). composebox runs with its defaults (managed subnets; its own bounds on concurrent starts and teardowns); the baseline leaves numbering to the daemon's default address pools.
- **latency**: %d rounds of SampleInit-to-ready against `+"`up -d --wait`"+` on multi-service, then %d rounds of exec of `+"`true`"+` through composebox, `+"`docker exec`"+` (same container) and `+"`compose exec -T`"+`; one operation at a time, alternating which side goes first. Percentiles are nearest-rank.
- **peak RSS**: VmHWM of the child process that ran the composebox capacity phase, read when the live count was reached (before the exec check and teardown).
`, r.Opts.N, r.Opts.Concurrency, payloadPath, r.Opts.CapacityConcurrency, r.Opts.Capacity, r.Opts.InitRounds, r.Opts.ExecRounds)
	return b.String()
}
