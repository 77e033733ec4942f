package orchestrator_test

import (
	"errors"
	"fmt"
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
	// A unique secret makes the content hash, and so the tag, new to this test.
	secret := fmt.Sprint(time.Now().UnixNano())
	built := taskInit(t, o, orchestrator.TaskSpec{Name: builder, YAML: []byte(`
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
	testutil.RemoveImage(t, o.Client(), ref)

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

	// The builder's own name may run it, as its own image: a new session of the same task.
	taskInit(t, o, orchestrator.TaskSpec{Name: builder, YAML: []byte(thief)})
}
