package orchestrator_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// syncBuffer is a log sink that the orchestrator's goroutines may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startTask inits a task of spec on a fresh orchestrator, with the base image its files build on.
func startTask(t *testing.T, spec orchestrator.TaskSpec, opts ...orchestrator.Option) (*orchestrator.Orchestrator, *orchestrator.Task) {
	t.Helper()
	o, _ := newOrchestrator(t, opts...)
	testutil.BaseImage(t)
	return o, taskInit(t, o, spec)
}

// runIn starts one sample of task, removed at the end of the test, and runs script in service.
func runIn(t *testing.T, task *orchestrator.Task, service, script string) (*orchestrator.Sample, string) {
	t.Helper()
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	res, err := mustSandbox(t, s, service).Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: exit %d, %v, stderr %q", service, res.ExitCode, err, res.StderrText())
	}
	return s, res.StdoutText()
}

// TestUnsetRegistryRunsLocalImages runs the Inspect packaging of a Cybench task whose images are
// ${UCB_CONTAINER_REGISTRY}<name>, with the variable unset, as its suite runs for local images:
// it is blank, the task warns once on the logger naming the flags that set it, and the agent
// reaches the target built locally.
func TestUnsetRegistryRunsLocalImages(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	o, task := startTask(t, orchestrator.TaskSpec{Path: suiteProject("inspect-cybench-local-images/locktalk")},
		orchestrator.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if got := compose.UnsetVariables(task.Project()); !slices.Equal(got, []string{"UCB_CONTAINER_REGISTRY"}) {
		t.Errorf("UnsetVariables = %v", got)
	}
	s, out := runIn(t, task, "agent", "wget -qO- http://target:1337/")
	if out != "locktalk\n" || s.Default().Service() != "agent" {
		t.Errorf("agent (default %s) fetched %q from the target, want its page", s.Default().Service(), out)
	}
	warned := strings.Count(log.String(), "variable=UCB_CONTAINER_REGISTRY")
	if warned != 1 || !strings.Contains(log.String(), "--pass-env UCB_CONTAINER_REGISTRY") {
		t.Errorf("%d warnings about UCB_CONTAINER_REGISTRY, want one naming the flags:\n%s", warned, log.String())
	}
	checkRemoved(t, o, s)
}

// A task whose samples each load its files again (it names ${COMPOSE_PROJECT_NAME}) warns about an
// unset variable once, at TaskInit, not once more for every sample; each sample gets it blank.
func TestUnsetVariableWarnedOncePerTask(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	_, task := startTask(t, orchestrator.TaskSpec{Name: "unset-" + compose.NewSampleID(), YAML: []byte(`services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    environment: {P: "${COMPOSE_PROJECT_NAME}", R: "[${CBX_TEST_UNSET_REGISTRY}]"}
`)}, orchestrator.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	for _, s := range startSamples(t, task, 2) {
		res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", `echo "$P $R"`}})
		if want := s.Project() + " []\n"; err != nil || res.StdoutText() != want {
			t.Errorf("%s: %q (%v), want %q", s.Project(), res.StdoutText(), err, want)
		}
	}
	if n := strings.Count(log.String(), "variable=CBX_TEST_UNSET_REGISTRY"); n != 1 {
		t.Errorf("%d warnings for 2 samples, want 1:\n%s", n, log.String())
	}
}

// TestHarborEnvironmentDirRuns runs a Harbor environment/ directory given on its own, whose
// docker-compose.yaml only hands main its variables: main is built from the Dockerfile beside
// it, as Harbor builds it, and gets the overlay's variables and Harbor's TEST_DIR.
func TestHarborEnvironmentDirRuns(t *testing.T) {
	t.Parallel()
	o, task := startTask(t, orchestrator.TaskSpec{
		Path:        suiteProject("harbor-environment-dir/s3-data-check/environment"),
		Environment: map[string]string{"DATA_URI": "s3://bucket/data"},
	})
	if task.Name() != "s3-data-check" || task.DefaultService() != "main" {
		t.Errorf("task %q, default %q: want the task's directory and main", task.Name(), task.DefaultService())
	}
	s, out := runIn(t, task, "main", `echo "$DATA_URI $DATA_REGION $TEST_DIR"; pwd`)
	if out != "s3://bucket/data eu-west-1 /tests\n/data\n" {
		t.Errorf("main: %q, want the overlay's variables, TEST_DIR and the Dockerfile's workdir", out)
	}
	checkRemoved(t, o, s)
}

// TestIncludeEnvFileSecretRuns: a secret whose variable only an include's env_file sets reaches
// both services that use it, as compose reads it.
func TestIncludeEnvFileSecretRuns(t *testing.T) {
	t.Parallel()
	o, task := startTask(t, orchestrator.TaskSpec{Path: project("compose-rules/include-env-secret")})
	s, out := runIn(t, task, "default", "cat /run/secrets/target_token")
	if out != "tok-from-the-include" {
		t.Errorf("default's secret: %q", out)
	}
	res, err := mustSandbox(t, s, "target").Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"cat", "/run/secrets/target_token"}})
	if err != nil || res.StdoutText() != "tok-from-the-include" {
		t.Errorf("target's secret: %q, %v", res.StdoutText(), err)
	}
	checkRemoved(t, o, s)
}

// TestEnvFileRawRuns: a format: raw env file gives the container its values as written.
func TestEnvFileRawRuns(t *testing.T) {
	t.Parallel()
	o, task := startTask(t, orchestrator.TaskSpec{Path: project("compose-rules/env-file-raw")})
	s, out := runIn(t, task, "default", `printf '%s|%s|%s|%s' "$PASSWORD" "$QUOTED" "$GREETING" "$DOTENV_QUOTED"`)
	if want := `pa$$word${NOT_A_VARIABLE}|"kept quotes"|hello world|quotes removed`; out != want {
		t.Errorf("environment %q, want %q", out, want)
	}
	checkRemoved(t, o, s)
}
