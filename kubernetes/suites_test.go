package kubernetes_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

func suiteProject(name string) string { return project(filepath.Join("suites", name)) }

// Two samples at once of the Cybench-shaped file (container_name, a fixed host port, an
// external network, a fixed-name volume, a healthchecked victim) with the agent beside the
// victim: each agent reaches its own victim by the victim's service name and its old alias,
// on the same ports as on Docker.
func TestCybenchFileOnKubernetes(t *testing.T) {
	e := onCluster(t)
	base := testutil.BaseImage(t)
	task := e.task(t, orchestrator.TaskSpec{
		Path:           suiteProject("cybench-shared-net"),
		AgentImage:     base,
		ImageOverrides: map[string]string{"victim": base},
	})
	const n = 2
	samples := make([]*orchestrator.Sample, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { samples[i] = e.sample(t, task) })
	}
	wg.Wait()
	for _, s := range samples {
		if s == nil {
			t.FailNow()
		}
		agent, victim := s.Default(), mustSandbox(t, s, "victim")
		if agent.Service() != "default" {
			t.Errorf("%s: default sandbox is %s, want the agent", s.Project(), agent.Service())
		}
		if err := victim.WriteFile(t.Context(), "/srv/whoami", []byte(s.Project())); err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{"victim", "locktalk.chals.local"} {
			res, err := agent.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"wget", "-q", "-O", "-", "http://" + host + ":1337/whoami"}, Timeout: 30 * time.Second})
			if err != nil || res.ExitCode != 0 || res.StdoutText() != s.Project() {
				t.Errorf("%s: agent fetched %q from %s (exit %d, %v), want its own victim's %q", s.Project(), res.StdoutText(), host, res.ExitCode, err, s.Project())
			}
		}
	}
	for _, s := range samples {
		if err := s.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.gone(t, s.Project())
	}
}

// A Terminal-Bench task runs on the cluster as on Docker: the client (image replaced) waits
// for the built server to be healthy and reaches it by its service name; the log directories
// it binds from the sample's own directory are there and writable.
func TestTerminalBenchTaskOnKubernetes(t *testing.T) {
	e := onCluster(t)
	base := testutil.BaseImage(t)
	task := e.task(t, orchestrator.TaskSpec{
		Path:           suiteProject("tbench-multi-container/grpc-health-check"),
		ImageOverrides: map[string]string{"client": base},
	})
	if task.Name() != "grpc-health-check" || task.DefaultService() != "client" {
		t.Errorf("task %q, default %q: want the task id and client", task.Name(), task.DefaultService())
	}
	s := e.sample(t, task)
	got := sh(t, s.Default(), `nc server 9000 </dev/null && echo $TEST_DIR && echo from-client > /logs/session.log && echo agent > /agent-logs/agent.log && cat /logs/session.log`)
	if got != "SERVING\n/tests\nfrom-client\n" {
		t.Errorf("client: %q", got)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.gone(t, s.Project())
}

// The multi-service project with a build, an x-default service and a service_healthy
// dependency gives the same results on either backend: app is the default sandbox, has its
// built file, and saw the api healthy as it started.
func TestBuiltXDefaultProjectOnBoth(t *testing.T) {
	onBoth(t, func(t *testing.T, e engine) {
		task := e.task(t, orchestrator.TaskSpec{Path: project("build-x-default")})
		if task.DefaultService() != "app" {
			t.Errorf("default service %q, want app", task.DefaultService())
		}
		s := e.sample(t, task)
		if s.Default().Service() != "app" || len(s.Sandboxes()) != 2 {
			t.Errorf("sandboxes: default %s, %d in all", s.Default().Service(), len(s.Sandboxes()))
		}
		got := sh(t, s.Default(), "cat /built.txt /tmp/first-answer; wget -q -O - http://api:8080/")
		if got != "built from app/Dockerfile\napi-ok\napi-ok\n" {
			t.Errorf("app: %q", got)
		}
		if err := s.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.gone(t, s.Project())
	})
}
