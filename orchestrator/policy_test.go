package orchestrator_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// The agent in one sample turns a directory of the task, which its container binds, into a
// symlink to /. The next SampleInit checks the bind sources again right before creating
// anything: it fails with a policy violation and creates nothing.
func TestPolicySymlinkSwapBetweenSamples(t *testing.T) {
	o, rec := newOrchestrator(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(`services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["./:/task", "./data:/data", "scratch:/scratch"]
    networks: [inner]
networks:
  inner: {}
volumes:
  scratch: {}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	name := "swap-" + compose.NewSampleID()
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, Path: dir})
	first, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := first.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "mv /task/data /task/data.old && ln -s / /task/data"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the swap from inside: %v %+v", err, res)
	}
	if err := first.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "data")); err != nil || target != "/" {
		t.Fatalf("data is not a symlink to / on the host: %q, %v", target, err)
	}

	_, err = task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "checked again before the containers are created") {
		t.Fatalf("second SampleInit = %v, want a policy violation from the re-check", err)
	}
	if n := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"="+name); n != 0 {
		t.Errorf("%d containers, networks or volumes exist after the refused sample", n)
	}
	if rec.count(orchestrator.EventSampleFailed) != 1 {
		t.Errorf("sample_failed events: %d", rec.count(orchestrator.EventSampleFailed))
	}
}

// A YAML task given without a working directory gets a private empty one, not the current
// directory (here /), which Task.Cleanup removes.
func TestPolicyYAMLTaskGetsPrivateDir(t *testing.T) {
	o, _ := newOrchestrator(t)
	t.Chdir("/")
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: "private-" + compose.NewSampleID(), YAML: []byte(`services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["./:/task:ro"]
`)})
	if err != nil {
		t.Fatal(err)
	}
	dir := task.Project().WorkingDir
	t.Cleanup(func() { _ = task.Cleanup(t.Context()) })
	if dir == "/" || !strings.Contains(dir, "composebox-task-") {
		t.Fatalf("working directory %q", dir)
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"ls", "-A", "/task"}})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.StdoutText()) != "" {
		t.Errorf("ls /task: %v %q, want an empty directory", err, res.StdoutText())
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the private directory %s is still there: %v", dir, err)
	}
}

// A provider service would make compose run its program on the host: /usr/bin/touch here,
// which would create files in the current or task directory. It is refused before anything
// runs, and nothing is created.
func TestPolicyProviderNeverRunsOnHost(t *testing.T) {
	o, _ := newOrchestrator(t)
	dir := t.TempDir()
	t.Chdir(dir)
	name := "provider-" + compose.NewSampleID()
	_, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, WorkingDir: dir, YAML: []byte(`services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
  x:
    image: ${COMPOSEBOX_BASE_IMAGE}
    provider:
      type: /usr/bin/touch
      options: {name: [pwned]}
`)})
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "--allow providers") {
		t.Fatalf("TaskInit = %v, want the provider refused, naming --allow providers", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files appeared on the host: %v", entries)
	}
	if n := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"="+name); n != 0 {
		t.Errorf("%d resources created", n)
	}
}

// A task's own policy (TaskSpec.Policy) overrides the orchestrator's; the runner's variables
// reach a file only through Environment or PassEnv; per-sample variables are each sample's own.
func TestPolicyPerTaskAndVariables(t *testing.T) {
	o, _ := newOrchestrator(t)
	yml := []byte(`services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    cap_add: [SYS_PTRACE]
    environment: {P: "${COMPOSE_PROJECT_NAME}", K: "${CBX_RUNNER_KEY}", G: "${GIVEN}"}
`)
	t.Setenv("CBX_RUNNER_KEY", "runner-secret")
	spec := orchestrator.TaskSpec{Name: "pertask-" + compose.NewSampleID(), YAML: yml, Environment: map[string]string{"GIVEN": "g"}}
	_, err := o.TaskInit(t.Context(), spec)
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "--allow-cap SYS_PTRACE") || strings.Contains(err.Error(), "runner-secret") {
		t.Fatalf("TaskInit = %v, want the capability refused", err)
	}
	p := compose.DefaultPolicy()
	p.AllowCapabilities = []string{"SYS_PTRACE"}
	spec.Policy, spec.PassEnv = &p, []string{"CBX_RUNNER_KEY"}
	task := taskInit(t, o, spec)
	for range 2 {
		s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", `echo "$P $K $G"`}})
		if want := s.Project() + " runner-secret g"; err != nil || strings.TrimSpace(res.StdoutText()) != want {
			t.Errorf("environment %q (%v), want %q", res.StdoutText(), err, want)
		}
	}
}
