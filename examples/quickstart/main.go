// Command quickstart is the library's main flow as one program: a task of two services, one
// sample of it, a command, a file written and read back, and the teardown, including after
// Ctrl-C. It runs as it is (`go run ./examples/quickstart`) on any machine with a Docker
// Engine: both services run on composebox's own base image, built locally, so nothing is pulled.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// The task's compose file. ${COMPOSEBOX_BASE_IMAGE} is composebox's base image (busybox); the
// default service starts once web's healthcheck passes.
const composeYAML = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      web: {condition: service_healthy}
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "mkdir -p /www && echo hello from web > /www/index.html && exec httpd -f -p 80 -h /www"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/"]
      interval: 1s
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	onEvent := func(e orchestrator.Event) {
		if e.Kind == orchestrator.EventSampleHealthy {
			fmt.Printf("event: %s %s in %s\n", e.Kind, e.Project, e.Duration.Round(time.Millisecond))
		}
	}
	o, err := orchestrator.New(orchestrator.WithLogger(logger), orchestrator.WithObserver(onEvent))
	if err != nil {
		return err
	}
	defer o.Close()

	// Once per task: resolve, police, build. A Path ("tasks/ctf-web") works the same way.
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: "example-quickstart", YAML: []byte(composeYAML)})
	if err != nil {
		return err
	}
	// Removes every sample the task still has. The teardown runs on a context of its own with
	// this deadline, so it still happens after Ctrl-C cancelled ctx.
	defer func() {
		if cerr := task.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Minute}); err == nil {
			err = cerr
		}
	}()

	// Once per sample: its own project, started and ready (web healthy) when this returns.
	sample, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: "42"})
	if err != nil {
		return err
	}
	defer sample.Cleanup(ctx) // idempotent; Task.Cleanup would remove it too

	// An argv, no implicit shell. A non-zero exit is a result, not an error.
	res, err := sample.Default().Exec(ctx, orchestrator.ExecRequest{
		Cmd:     []string{"wget", "-qO-", "http://web/"},
		Timeout: time.Minute,
	})
	if err != nil {
		return err
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.StdoutText())

	web, err := sample.Sandbox("web")
	if err != nil {
		return err
	}
	if err := web.WriteFile(ctx, "/srv/flag.txt", []byte("cbx{example}")); err != nil {
		return err
	}
	data, err := web.ReadFile(ctx, "/srv/flag.txt")
	if err != nil {
		return err
	}
	fmt.Printf("read back: %s\n", data)

	conn, err := web.Connection(ctx) // its container, a command to enter it, published ports
	if err != nil {
		return err
	}
	fmt.Printf("enter web with: %s\n", conn.Command)
	return nil
}
