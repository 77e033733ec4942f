// Command warmpool keeps two ready samples of a task in a warm pool and takes one: the
// SampleInit that takes it asks the daemon nothing, so it returns in microseconds. It runs as it
// is (`go run ./examples/warmpool`) on any machine with a Docker Engine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

const composeYAML = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "warmpool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	o, err := orchestrator.New()
	if err != nil {
		return err
	}
	defer o.Close()

	// Warm: 2 starts two samples in the background from TaskInit on. task.Prewarm(ctx, n)
	// changes the target later; Prewarm(ctx, 0) ends the pool.
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: "example-warmpool", YAML: []byte(composeYAML), Warm: 2})
	if err != nil {
		return err
	}
	// Stops the refills and removes the pool with the task's other samples.
	defer func() {
		if cerr := task.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Minute}); err == nil {
			err = cerr
		}
	}()

	// A runner would not wait: a SampleInit on an empty pool starts its sample cold. Waiting
	// here shows the take on its own.
	if err := waitReady(ctx, task, 2); err != nil {
		return err
	}

	start := time.Now()
	sample, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: "episode-17"})
	if err != nil {
		return err
	}
	defer sample.Cleanup(ctx)
	took := time.Since(start)

	res, err := sample.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"echo", "ready"}})
	if err != nil {
		return err
	}
	fmt.Printf("sample %s (%s) taken in %s: %s", sample.ID(), sample.Project(), took, res.StdoutText())
	st := task.PoolStatus() // the pool refills in the background
	fmt.Printf("pool: target %d, ready or filling %d\n", st.Target, st.Ready+st.Filling)
	return nil
}

// waitReady polls the pool until n samples are ready, the task turns out unpoolable, or ctx ends.
func waitReady(ctx context.Context, task *orchestrator.Task, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st := task.PoolStatus()
		if !st.Poolable {
			return fmt.Errorf("the task cannot be pooled: %s", st.Reason)
		}
		if st.Ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d warm samples (ready %d, failures %d): %w", n, st.Ready, st.Failures, ctx.Err())
		case <-tick.C:
		}
	}
}
