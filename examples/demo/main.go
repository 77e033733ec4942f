// Command demo brings up testdata/projects/multi-service with the composebox library, shows
// service-to-service traffic from the default sandbox, prints how long each phase took, and
// tears everything down. Run it with `make demo`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	path := "testdata/projects/multi-service"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := run(ctx, path); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func phase(name string, start time.Time, detail string) {
	fmt.Printf("  %-44s %8s  %s\n", name, time.Since(start).Round(time.Millisecond), detail)
}

func run(ctx context.Context, path string) (err error) {
	fmt.Printf("composebox demo: %s\n", path)
	o, err := orchestrator.New()
	if err != nil {
		return err
	}
	defer o.Close()

	start := time.Now()
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Path: path})
	if err != nil {
		return err
	}
	defer func() {
		t := time.Now()
		if cerr := task.Cleanup(ctx); cerr != nil && err == nil {
			err = cerr
		}
		phase("task cleanup", t, "")
	}()
	phase("task init (resolve, policy, build images)", start, fmt.Sprintf("images %v", task.Images()))

	start = time.Now()
	sample, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		return err
	}
	var services []string
	for _, sb := range sample.Sandboxes() {
		services = append(services, sb.Service())
	}
	phase("sample init (up, wait until healthy)", start, fmt.Sprintf("%s: %s", sample.Project(), strings.Join(services, ", ")))

	def := sample.Default()
	for _, probe := range []struct{ name, script string }{
		{"default -> http://web/ (by service name)", "wget -qO- http://web/"},
		{"default -> db:5432 (by service name)", "nc -w 2 db 5432 </dev/null"},
	} {
		start = time.Now()
		res, err := def.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", probe.script}, Timeout: 10 * time.Second})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("%s: exit %d: %s", probe.name, res.ExitCode, res.StderrText())
		}
		phase(probe.name, start, fmt.Sprintf("%q", strings.TrimSpace(res.StdoutText())))
	}

	start = time.Now()
	payload := []byte("written by the composebox demo\n")
	if err := def.WriteFile(ctx, "notes/demo.txt", payload); err != nil {
		return err
	}
	back, err := def.ReadFile(ctx, "notes/demo.txt")
	if err != nil {
		return err
	}
	phase("write + read notes/demo.txt in default", start, fmt.Sprintf("%d bytes round-tripped, equal=%t", len(back), string(back) == string(payload)))

	start = time.Now()
	if err := sample.Cleanup(ctx); err != nil {
		return err
	}
	phase("sample cleanup (containers, network)", start, "")
	return nil
}
