package orchestrator_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// A task that names the image composebox built for another task (its tag is a hash anyone with
// the files can compute) is refused unless the runner allows other-tasks-images; the same image
// by its own task, and the base image by any task, run.
func TestAttackOtherTasksImageRefused(t *testing.T) {
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	builder := uniqueTask("builder")
	builderDir := t.TempDir()
	// A unique secret makes the content hash, and so the tag, new to this test.
	secret := fmt.Sprint(time.Now().UnixNano())
	built := taskInit(t, o, orchestrator.TaskSpec{Name: builder, WorkingDir: builderDir, YAML: []byte(`
services:
  default:
    build:
      context: .
      dockerfile_inline: |
        FROM ${COMPOSEBOX_BASE_IMAGE}
        RUN echo ` + secret + ` > /secret
    command: ["tail", "-f", "/dev/null"]
`)})
	ref := built.Images()["default"]
	if ref == "" {
		t.Fatalf("the builder task built nothing: %v", built.Images())
	}
	testutil.RemoveImage(t, dockerClient(t, o), ref)

	thief := `
services:
  default:
    image: ` + ref + `
    command: ["tail", "-f", "/dev/null"]
`
	name := uniqueTask("thief")
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: name, YAML: []byte(thief)})
	if task != nil {
		t.Cleanup(func() { _ = task.Cleanup(t.Context()) })
	}
	if !errors.Is(err, orchestrator.ErrPolicyViolation) {
		t.Fatalf("task running another task's image: err = %v, want a policy violation", err)
	}
	var pe *compose.PolicyError
	if !errors.As(err, &pe) || len(pe.Violations) != 1 || pe.Violations[0].Rule != "other-tasks-images" ||
		pe.Violations[0].OptIn != "--allow other-tasks-images" || !strings.Contains(err.Error(), builder) {
		t.Fatalf("err = %v, want one other-tasks-images violation naming %s and its opt-in", err, builder)
	}

	// Opted in, it runs.
	allowed := compose.DefaultPolicy()
	allowed.AllowOtherTasksImages = true
	task2 := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(thief), Policy: &allowed})
	s := startSamples(t, task2, 1)[0]
	r, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"cat", "/secret"}})
	if err != nil || strings.TrimSpace(r.StdoutText()) != secret {
		t.Fatalf("opted in: cat /secret: %v %+v", err, r)
	}

	// The builder itself may run it, as its own image: a new session of the same task, by its
	// name and from its directory. Its name alone, from another directory, may not.
	taskInit(t, o, orchestrator.TaskSpec{Name: builder, WorkingDir: builderDir, YAML: []byte(thief)})
	task3, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: builder, YAML: []byte(thief)})
	if task3 != nil {
		t.Cleanup(func() { _ = task3.Cleanup(t.Context()) })
	}
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "a name alone") {
		t.Fatalf("the builder's name from another directory: err = %v, want a policy violation", err)
	}
}

// A Harbor task names itself after its victim ([task] name) and runs the victim's built image
// ([environment] docker_image): the image is the victim's task's, by its identity (the name
// and the victim's directory), not this one's, and it is refused. The victim itself, run
// again, still gets its image.
func TestAttackHarborTaskNamedAfterItsVictim(t *testing.T) {
	o, _ := newOrchestrator(t)
	testutil.BaseImage(t)
	victimName := uniqueTask("victim")
	secret := fmt.Sprint("baked-in-", time.Now().UnixNano())
	harbor := func(toml string, files map[string]string) string {
		dir := t.TempDir()
		files["task.toml"] = toml
		for name, content := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(name, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	victimDir := harbor("[task]\nname = \""+victimName+"\"\n", map[string]string{
		"environment/Dockerfile": "ARG COMPOSEBOX_BASE_IMAGE\nFROM ${COMPOSEBOX_BASE_IMAGE}\nRUN echo " + secret + " > /secret\n",
	})
	victim := taskInit(t, o, orchestrator.TaskSpec{Path: victimDir})
	ref := victim.Images()["main"]
	if victim.Name() != victimName || ref == "" {
		t.Fatalf("victim %q built %v", victim.Name(), victim.Images())
	}
	testutil.RemoveImage(t, dockerClient(t, o), ref)

	thiefDir := harbor("[task]\nname = \""+victimName+"\"\n[environment]\ndocker_image = \""+ref+"\"\n", map[string]string{"environment/": ""})
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Path: thiefDir})
	if task != nil {
		t.Cleanup(func() { _ = task.Cleanup(t.Context()) })
	}
	if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), "--allow other-tasks-images") {
		t.Fatalf("a Harbor task named after its victim, running its image: err = %v, want a policy violation", err)
	}
	if task != nil {
		s := startSamples(t, task, 1)[0]
		r, _ := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"cat", "/secret"}})
		t.Fatalf("the thief read the victim's secret: %q", r.StdoutText())
	}

	// The victim's own task, again: its image is its own.
	again := taskInit(t, o, orchestrator.TaskSpec{Path: victimDir})
	if again.Images()["main"] != ref {
		t.Errorf("the victim again: image %v, want %s", again.Images(), ref)
	}
}
