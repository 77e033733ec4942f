// Command fork is `make bench-fork`: a three-service sample with 100 MB written in one
// service, forked one way and eight ways, and reset to a snapshot, each against a fresh
// SampleInit of the same task in the same run, as ratios of medians over the rounds.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/composebox/composebox/bench/internal/mdsection"
	"github.com/composebox/composebox/orchestrator"
)

// task is three services on the base image, as testdata/projects/multi-service: the default
// sandbox waits for web (HTTP) and db (TCP) to be healthy.
const task = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["data:/data"]
    depends_on:
      web: {condition: service_healthy}
      db: {condition: service_healthy}
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 80 -h /www"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/"]
      interval: 1s
      retries: 30
  db:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["nc", "-ll", "-p", "5432", "-e", "echo", "pong"]
    healthcheck:
      test: ["CMD-SHELL", "nc -w 1 127.0.0.1 5432 </dev/null | grep -q pong"]
      interval: 1s
      retries: 30
volumes:
  data: {}
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

type options struct {
	Rounds, MB, Wide int
	Out, Note        string
}

func run(ctx context.Context, args []string) int {
	var o options
	fs := flag.NewFlagSet("fork", flag.ContinueOnError)
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds; each measures every operation once")
	fs.IntVar(&o.MB, "mb", 100, "MB written in the default service (half in its filesystem, half in its volume)")
	fs.IntVar(&o.Wide, "wide", 8, "forks of the wide fork")
	fs.StringVar(&o.Out, "out", "", "also write the results into this Markdown file's bench-fork section")
	fs.StringVar(&o.Note, "note", "", "a note on the run's conditions, for the Markdown")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	began := time.Now().UTC()
	m, err := measure(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-fork: %v\n", err)
		return 1
	}
	text := render(o, m, began, time.Since(began))
	fmt.Print(text)
	if o.Out != "" {
		if err := mdsection.Write(o.Out, "bench-fork", text); err != nil {
			fmt.Fprintf(os.Stderr, "bench-fork: %v\n", err)
			return 1
		}
	}
	return 0
}

// timings are each operation's durations, one per round.
type timings map[string][]time.Duration

func measure(ctx context.Context, o options) (timings, error) {
	opts := []orchestrator.Option{orchestrator.WithStateDir(filepath.Join(os.TempDir(), "cbxbench-fork-state"))}
	// BENCH_DEBUG=1 logs the orchestrator's debug lines and every event, timestamped, to
	// stderr: where a slow round spent its time.
	if os.Getenv("BENCH_DEBUG") != "" {
		opts = append(opts, orchestrator.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))),
			orchestrator.WithObserver(func(e orchestrator.Event) {
				fmt.Fprintf(os.Stderr, "%s event %s %s %s %s %s\n", time.Now().Format("15:04:05.000"), e.Kind, e.Project, e.Service, e.Message, e.Duration)
			}))
	}
	orc, err := orchestrator.New(opts...)
	if err != nil {
		return nil, err
	}
	defer orc.Close()
	t, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Name: "cbxbench-fork", YAML: []byte(task)})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := t.Cleanup(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(os.Stderr, "bench-fork: cleanup: %v\n", err)
		}
	}()
	src, err := t.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		return nil, err
	}
	half := o.MB / 2
	fill := fmt.Sprintf("dd if=/dev/urandom of=/root/big bs=1M count=%d 2>/dev/null && dd if=/dev/urandom of=/data/big bs=1M count=%d 2>/dev/null", half, o.MB-half)
	if res, err := src.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", fill}}); err != nil || res.ExitCode != 0 {
		return nil, fmt.Errorf("write %d MB: %v %s", o.MB, err, res.Stderr)
	}
	if _, err := src.Snapshot(ctx, "bench"); err != nil {
		return nil, err
	}
	out := timings{}
	clean := func(ss ...*orchestrator.Sample) {
		for _, s := range ss {
			_ = s.Cleanup(context.WithoutCancel(ctx))
		}
	}
	for r := range o.Rounds {
		// Alternated within the round, so that the machine's drift falls on every operation.
		start := time.Now()
		fresh, err := t.SampleInit(ctx, orchestrator.SampleSpec{})
		if err != nil {
			return nil, err
		}
		out["fresh"] = append(out["fresh"], time.Since(start))
		clean(fresh)

		start = time.Now()
		one, err := src.Fork(ctx, 1)
		if err != nil {
			return nil, err
		}
		out["fork1"] = append(out["fork1"], time.Since(start))
		clean(one...)

		start = time.Now()
		wide, err := src.Fork(ctx, o.Wide)
		if err != nil {
			return nil, err
		}
		out["forkN"] = append(out["forkN"], time.Since(start))
		clean(wide...)

		start = time.Now()
		if err := src.Reset(ctx, "bench"); err != nil {
			return nil, err
		}
		out["reset"] = append(out["reset"], time.Since(start))
		fmt.Fprintf(os.Stderr, "bench-fork: round %d: fresh %s, fork 1 %s, fork %d %s, reset %s\n", r+1,
			last(out["fresh"]), last(out["fork1"]), o.Wide, last(out["forkN"]), last(out["reset"]))
	}
	return out, nil
}

func last(d []time.Duration) time.Duration { return d[len(d)-1].Round(time.Millisecond) }

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func render(o options, m timings, began time.Time, took time.Duration) string {
	var b strings.Builder
	fresh, one, wide, reset := median(m["fresh"]), median(m["fork1"]), median(m["forkN"]), median(m["reset"])
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	verdict := func(r, goal float64) string {
		if r <= goal {
			return "met"
		}
		return "missed"
	}
	fmt.Fprintf(&b, "### Fork, snapshot and reset (`make bench-fork`)\n\n")
	fmt.Fprintf(&b, "Run %s, %s, %d rounds. A three-service sample (default, web, db; healthchecks every second) with %d MB written in the default service (half in its filesystem, half in its named volume). Each round: a fresh SampleInit of the same task, a fork one way, a fork %d ways, a reset to a snapshot taken once; medians.%s\n\n",
		began.Format("2006-01-02 15:04 UTC"), took.Round(time.Second), o.Rounds, o.MB, o.Wide, cmp.Or(" "+o.Note, ""))
	fmt.Fprintf(&b, "| operation | median | rounds | ratio | goal |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| fresh SampleInit to ready | %s | %s | 1.00 | |\n", fresh.Round(time.Millisecond), list(m["fresh"]))
	r1 := ratio(one, fresh)
	fmt.Fprintf(&b, "| fork 1 way to ready | %s | %s | %.2f× fresh | ≤ 1.3× (%s) |\n", one.Round(time.Millisecond), list(m["fork1"]), r1, verdict(r1, 1.3))
	rn := ratio(wide, one)
	fmt.Fprintf(&b, "| fork %d ways to ready | %s | %s | %.2f× fork 1 | ≤ 2× (%s) |\n", o.Wide, wide.Round(time.Millisecond), list(m["forkN"]), rn, verdict(rn, 2))
	rr := ratio(reset, fresh)
	fmt.Fprintf(&b, "| reset to ready | %s | %s | %.2f× fresh | ≤ 1.0× (%s) |\n\n", reset.Round(time.Millisecond), list(m["reset"]), rr, verdict(rr, 1.0))
	return b.String()
}

func list(d []time.Duration) string {
	s := make([]string, len(d))
	for i, x := range d {
		s[i] = fmt.Sprintf("%.2fs", x.Seconds())
	}
	return strings.Join(s, ", ")
}
