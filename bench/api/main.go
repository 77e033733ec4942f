// Command api is the Go library's side of `make bench-api` (bench/api/bench_api.py drives the
// run). It starts one sample of a one-service task through the orchestrator, then answers
// commands read line by line on stdin with one JSON line each on stdout, so that the driver can
// interleave library calls with the Python client's and time both in the same minutes:
//
//	exec          Sandbox.Exec of `true`; {"ms": …}
//	conc N        N execs of `true` at once; {"wall_ms": …, "ms": [...]}
//	write PATH N  Sandbox.WriteFile of N random bytes; {"ms": …}
//	read PATH     Sandbox.ReadFile; {"ms": …, "bytes": …}
//
// Times are measured around the library call only. The sample and its task are removed when
// stdin ends (the driver closes it, or dies), and on SIGINT/SIGTERM.
//
// Usage: api -task NAME -yaml FILE
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench api (library):", err)
		os.Exit(1)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func run(ctx context.Context) (err error) {
	taskName := flag.String("task", "cbxbench-api-lib", "task name (labels every resource)")
	yamlPath := flag.String("yaml", "", "compose file of the one-service task")
	flag.Parse()
	yaml, err := os.ReadFile(*yamlPath)
	if err != nil {
		return err
	}
	state, err := os.MkdirTemp("", "cbxbench-api-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	orc, err := orchestrator.New(orchestrator.WithStateDir(state))
	if err != nil {
		return err
	}
	defer orc.Close()
	task, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Name: *taskName, YAML: yaml})
	if err != nil {
		return err
	}
	defer func() {
		// Even after a signal: this is the cleanup.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if cerr := task.Cleanup(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: "lib"})
	if err != nil {
		return err
	}
	sb := s.Default()

	out := json.NewEncoder(os.Stdout)
	reply := func(v any) error { return out.Encode(v) }
	if err := reply(map[string]any{"ready": true, "container": sb.ContainerName()}); err != nil {
		return err
	}

	execTrue := func() (float64, error) {
		t0 := time.Now()
		r, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		d := time.Since(t0)
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("exec true: exit %d", r.ExitCode)
		}
		return ms(d), err
	}

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		var line string
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case line, ok = <-lines:
		}
		if !ok {
			return nil
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var res map[string]any
		var cerr error
		switch {
		case f[0] == "exec":
			var d float64
			d, cerr = execTrue()
			res = map[string]any{"ms": d}
		case f[0] == "conc" && len(f) == 2:
			n, _ := strconv.Atoi(f[1])
			times := make([]float64, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			t0 := time.Now()
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					times[i], errs[i] = execTrue()
				}(i)
			}
			wg.Wait()
			wall := time.Since(t0)
			for _, e := range errs {
				if e != nil {
					cerr = e
					break
				}
			}
			res = map[string]any{"wall_ms": ms(wall), "ms": times}
		case f[0] == "write" && len(f) == 3:
			n, _ := strconv.Atoi(f[2])
			data := make([]byte, n)
			_, _ = rand.Read(data)
			t0 := time.Now()
			cerr = sb.WriteFile(ctx, f[1], data)
			res = map[string]any{"ms": ms(time.Since(t0))}
		case f[0] == "read" && len(f) == 2:
			t0 := time.Now()
			var b []byte
			b, cerr = sb.ReadFile(ctx, f[1])
			res = map[string]any{"ms": ms(time.Since(t0)), "bytes": len(b)}
		default:
			cerr = fmt.Errorf("unknown command %q", line)
		}
		if cerr != nil {
			res = map[string]any{"error": cerr.Error()}
		}
		if err := reply(res); err != nil {
			return err
		}
	}
}
