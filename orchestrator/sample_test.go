package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
)

func TestMultiServiceComesUpHealthyInDependencyOrder(t *testing.T) {
	o, rec := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Path: project("multi-service")})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })

	sbs := s.Sandboxes()
	if len(sbs) != len(task.Project().Services) || sbs[0].Service() != "default" || !sbs[0].IsDefault() {
		t.Fatalf("sandboxes %v: want one per service, default first", names(sbs))
	}
	if !strings.HasPrefix(s.Project(), "cbx-multi-service-") {
		t.Errorf("project name %q", s.Project())
	}
	c := dockerClient(t, o)
	started := map[string]time.Time{}
	for _, sb := range sbs {
		info, err := c.ContainerInspect(t.Context(), sb.ContainerID())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Status != "running" {
			t.Errorf("%s is %s", sb.Service(), info.State.Status)
		}
		// Ready by composebox's own probe: Docker's first probe may not have run yet.
		if h := info.State.Health; h != nil && h.Status != "healthy" && h.Status != "starting" {
			t.Errorf("%s health is %s", sb.Service(), h.Status)
		}
		started[sb.Service()], _ = time.Parse(time.RFC3339Nano, info.State.StartedAt)
		if info.Config.Labels[labels.LabelTask] != task.Name() || info.Config.Labels[labels.LabelOwner] != labels.SelfOwner() {
			t.Errorf("%s labels %v", sb.Service(), info.Config.Labels)
		}
	}
	ready := rec.readyTimes(s.Project())
	// Every service_healthy dependency was ready before its dependent started.
	checked := 0
	for name, svc := range task.Project().Services {
		for dep, d := range svc.DependsOn {
			if d.Condition != "service_healthy" {
				continue
			}
			checked++
			if r, ok := ready[dep]; !ok || started[name].Before(r) {
				t.Errorf("%s started at %s, before %s was ready (%s)", name, started[name], dep, r)
			}
		}
	}
	if checked == 0 {
		t.Error("multi-service has no service_healthy dependency to check")
	}
	// The dependencies' healthchecks really pass: their test, run now, succeeds.
	for dep := range ready {
		sb, err := s.Sandbox(dep)
		if err != nil {
			t.Fatal(err)
		}
		hc := task.Project().Services[dep].HealthCheck
		if hc == nil {
			continue
		}
		argv := hc.Test[1:]
		if hc.Test[0] == "CMD-SHELL" {
			argv = []string{"sh", "-c", strings.Join(hc.Test[1:], " ")}
		}
		if res, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: argv}); err != nil || res.ExitCode != 0 {
			t.Errorf("%s's healthcheck fails after it was ready: %v %+v", dep, err, res)
		}
	}
	// Service DNS: the default sandbox reaches web and db by their service names.
	for _, probe := range []struct{ script, want string }{
		{"wget -qO- http://web/", "hello from web"},
		{"nc -w 2 db 5432 </dev/null", "pong"},
	} {
		res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", probe.script}, Timeout: 20 * time.Second})
		if err != nil || res.ExitCode != 0 || !strings.Contains(res.StdoutText(), probe.want) {
			t.Errorf("%s: %v, exit %d, stdout %q, stderr %q", probe.script, err, res.ExitCode, res.StdoutText(), res.StderrText())
		}
	}
	if rec.count(orchestrator.EventSampleHealthy) != 1 || rec.count(orchestrator.EventSampleStarted) != 1 {
		t.Errorf("events: %+v", rec.events)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.Resources(t, c, projectLabel(s.Project())); n != 0 {
		t.Errorf("%d resources left after cleanup", n)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Errorf("second cleanup: %v", err)
	}
}

func names(sbs []*orchestrator.Sandbox) []string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.Service())
	}
	return out
}

// inline returns a task spec for a YAML project on the base image.
func inline(yaml string) orchestrator.TaskSpec {
	return orchestrator.TaskSpec{Name: "inline", YAML: []byte(yaml)}
}

func TestAlwaysFailingHealthcheckFailsWithinBudget(t *testing.T) {
	o, rec := newOrchestrator(t)
	task := taskInit(t, o, inline(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    healthcheck:
      test: ["CMD", "sh", "-c", "echo probe-said-no; exit 1"]
      interval: 200ms
      timeout: 10s
      retries: 2
`))
	_, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	var nr *lifecycle.NotReadyError
	if !errors.As(err, &nr) || nr.Reason != "unhealthy" || !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("err = %v, want an unhealthy NotReadyError", err)
	}
	if nr.Waited > nr.Budget {
		t.Errorf("failed after %s, past its budget %s", nr.Waited, nr.Budget)
	}
	if !strings.Contains(err.Error(), "probe-said-no") || !strings.Contains(err.Error(), "service default") {
		t.Errorf("error lacks the probe output or the service: %v", err)
	}
	if n := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"=inline"); n != 0 {
		t.Errorf("%d resources left after a failed SampleInit", n)
	}
	if rec.count(orchestrator.EventSampleFailed) != 1 {
		t.Errorf("no sample_failed event: %+v", rec.events)
	}
}

func TestServiceExitingNonZeroFailsAtOnce(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, inline(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  broken:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo cannot-start >&2; exit 1"]
`))
	_, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	var nr *lifecycle.NotReadyError
	if !errors.As(err, &nr) || nr.Reason != "exited" {
		t.Fatalf("err = %v, want an exited NotReadyError", err)
	}
	if len(nr.Services) != 1 || nr.Services[0].Service != "broken" || nr.Services[0].ExitCode != 1 {
		t.Errorf("report %+v, want only broken with exit code 1", nr.Services)
	}
	if !strings.Contains(nr.Services[0].Logs, "cannot-start") {
		t.Errorf("log tail %q lacks the service's output", nr.Services[0].Logs)
	}
	if n := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"=inline"); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestInitSidecarExitingZeroIsAccepted(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Path: project("init-sidecar")})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	if len(s.Sandboxes()) >= len(task.Project().Services) {
		t.Errorf("sandboxes %v include the finished one-shot service", names(s.Sandboxes()))
	}
}

func TestCancelMidUpLeavesNothing(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := dockerClient(t, o)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "cancel-mid-up", Path: project("multi-service")})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancel as soon as the first container of the sample exists: compose is mid-Up.
	go func() {
		f := filters.NewArgs(filters.Arg("label", labels.LabelTask+"=cancel-mid-up"))
		for ctx.Err() == nil {
			list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
			if err == nil && len(list) > 0 {
				cancel()
				return
			}
		}
	}()
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err == nil {
		_ = s.Cleanup(context.Background())
		t.Fatal("SampleInit succeeded despite cancellation")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := testutil.Resources(t, c, labels.LabelTask+"=cancel-mid-up"); n != 0 {
		t.Errorf("%d resources left after a cancelled SampleInit", n)
	}
}

func TestParallelSamplesDoNotClash(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Path: project("multi-service")})
	const n = 8
	samples := make([]*orchestrator.Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			samples[i], errs[i] = task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range samples {
			if s != nil {
				_ = s.Cleanup(context.Background())
			}
		}
	})
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if seen[samples[i].Project()] {
			t.Fatalf("project name %s used twice", samples[i].Project())
		}
		seen[samples[i].Project()] = true
	}
	for _, s := range samples {
		if err := s.Cleanup(t.Context()); err != nil {
			t.Error(err)
		}
	}
	if n := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"="+task.Name()); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestDockerfileTaskBuildsOnceForFiveSamples(t *testing.T) {
	// A copy of dockerfile-only with a unique file, so its content hash (and tag) is new.
	dir := t.TempDir()
	src := project("dockerfile-only")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "unique.txt"), []byte(fmt.Sprint(time.Now().UnixNano())), 0o644); err != nil {
		t.Fatal(err)
	}
	o, rec := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "dockerfile-once", Path: dir})
	for _, ref := range task.Images() {
		testutil.RemoveImage(t, dockerClient(t, o), ref)
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
			if err == nil {
				err = s.Cleanup(t.Context())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.count(orchestrator.EventImageBuilt); got != 1 {
		t.Errorf("%d image builds for 5 samples, want 1", got)
	}
}

func TestMissingImageIsAClearError(t *testing.T) {
	o, _ := newOrchestrator(t)
	_, err := o.TaskInit(t.Context(), inline(`
services:
  default:
    image: composebox-test/never-built:1
`))
	if !errors.Is(err, orchestrator.ErrNotFound) || !strings.Contains(err.Error(), "composebox-test/never-built:1") {
		t.Fatalf("err = %v, want ErrNotFound naming the image", err)
	}
}

func TestUnknownServiceIsNotFound(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	if _, err := s.Sandbox("nope"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
	if s.Default().Service() != "default" || s.Default().WorkingDir() != "/workspace" {
		t.Errorf("default sandbox %s in %s", s.Default().Service(), s.Default().WorkingDir())
	}
}

// TestReadinessDoesNotWaitForDockersFirstProbe: Engine 20.10 runs a healthcheck first after its
// interval (30 s by default here). With a 10 s budget, the sample can only come up if
// composebox's own probing makes the dependency ready, and a probe that never passes still
// fails the sample.
func TestReadinessDoesNotWaitForDockersFirstProbe(t *testing.T) {
	o, rec := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "default-interval", ReadyTimeout: 10 * time.Second, YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      dep: {condition: service_healthy}
  dep:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "touch /tmp/up; exec tail -f /dev/null"]
    healthcheck:
      test: ["CMD", "test", "-f", "/tmp/up"]
`)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatalf("sample with a default-interval healthcheck did not come up within 10 s: %v", err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	if _, ok := rec.readyTimes(s.Project())["dep"]; !ok {
		t.Error("no service_ready event for dep")
	}

	never := taskInit(t, o, orchestrator.TaskSpec{Name: "never-healthy", ReadyTimeout: 2 * time.Second, YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    healthcheck:
      test: ["CMD", "false"]
`)})
	_, err = never.SampleInit(t.Context(), orchestrator.SampleSpec{})
	var nr *lifecycle.NotReadyError
	if !errors.As(err, &nr) || nr.Reason != "timeout" || !errors.Is(err, orchestrator.ErrTimeout) {
		t.Fatalf("err = %v, want a timeout NotReadyError", err)
	}
}

func TestConnection(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "connection", YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["httpd", "-f", "-p", "8080"]
    user: sandbox
    ports: ["127.0.0.1::8080", "8080/udp"]
`)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	conn, err := s.Default().Connection(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if conn.ContainerID != s.Default().ContainerID() || conn.ContainerName != s.Default().ContainerName() {
		t.Errorf("connection names %s/%s, sandbox %s/%s", conn.ContainerID, conn.ContainerName, s.Default().ContainerID(), s.Default().ContainerName())
	}
	if want := "docker exec -it --user sandbox " + conn.ContainerName + " sh"; conn.Command != want {
		t.Errorf("command %q, want %q", conn.Command, want)
	}
	if len(conn.Ports) != 2 {
		t.Fatalf("ports %+v, want tcp and udp 8080", conn.Ports)
	}
	for _, p := range conn.Ports {
		if p.ContainerPort != 8080 || p.HostIP != "127.0.0.1" || p.HostPort == 0 {
			t.Errorf("port %+v: want 8080 reachable on 127.0.0.1", p)
		}
	}
}

// Two tasks of the same name in one process share labels (task, owner), so Task.Cleanup's sweep
// by labels must still remove only its own samples.
func TestTaskCleanupSparesSameNamedTask(t *testing.T) {
	o, _ := newOrchestrator(t)
	spec := orchestrator.TaskSpec{Name: "twin", YAML: []byte(twoServices)}
	a := taskInit(t, o, spec)
	b := taskInit(t, o, spec)
	sa, err := a.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Cleanup(t.Context()); err != nil {
		t.Fatalf("cleanup of the first task: %v", err)
	}
	if _, err := sb.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil {
		t.Errorf("the other task's sample died with the first task's cleanup: %v", err)
	}
	if _, err := sa.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err == nil {
		t.Error("the cleaned-up task's sample still runs")
	}
}
