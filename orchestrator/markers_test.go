package orchestrator_test

import (
	"testing"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// squatter declares, as volumes of its own, the names composebox's markers had: the detach,
// warm and claim markers' <project>_cbx-*.
const squatter = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["cbx-detached:/d", "cbx-warm:/w", "cbx-claim:/c"]
volumes:
  cbx-detached: {}
  cbx-warm: {}
  cbx-claim: {}
`

// fixedSquatter names its volume after the detach marker of its own sample, through
// ${COMPOSE_PROJECT_NAME}, under the old name and the new.
const fixedSquatter = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["old:/o", "new:/n"]
volumes:
  old:
    name: ${COMPOSE_PROJECT_NAME}_cbx-detached
  new:
    name: cbx.detached.${COMPOSE_PROJECT_NAME}
`

// A project that declares volumes named like composebox's markers changes nothing `ls`,
// `cleanup` and the pool believe: its pooled sample is warm, then claimed under the id its
// taker gave, and once handed over it is detached, which `cleanup --stale` leaves alone.
func TestAttackProjectVolumesCannotPreemptMarkers(t *testing.T) {
	o, rec := newOrchestrator(t)
	c := dockerClient(t, o)
	name := uniqueTask("squat")
	removeTaskProjects(t, c, name)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(squatter), Warm: 1})
	waitPool(t, task, "1 ready", full(1))

	got := listed(t, name)
	if len(got) != 1 {
		t.Fatalf("ls: %d projects of the task, want the warm one: %+v", len(got), got)
	}
	for _, p := range got {
		if p.Pool != labels.PoolWarm || p.Status != backend.StatusAlive {
			t.Fatalf("ls: %s pool %q status %s, want warm and alive", p.Name, p.Pool, p.Status)
		}
	}

	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: "taken-1"})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(t.Context()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.count(orchestrator.EventPoolTaken); n != 1 {
		t.Fatalf("pool_taken events: %d, want 1", n)
	}
	waitListed(t, name, "the taken sample as taken-1, claimed", func(got map[string]backend.Project) bool {
		p := got[s.Project()]
		return p.Sample == "taken-1" && p.Pool == labels.PoolClaimed && p.Status == backend.StatusAlive
	})

	if err := s.Detach(t.Context()); err != nil {
		t.Fatalf("detach: %v", err)
	}
	if got := status(t, c, s.Project()); got != backend.StatusDetached {
		t.Fatalf("handed-over sample is %s, want detached", got)
	}
	if _, err := tracking.Sweep(t.Context(), c, backend.Selector{Stale: true, Task: name}, cleanup.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := status(t, c, s.Project()); got != backend.StatusDetached {
		t.Fatalf("after cleanup --stale the handed-over sample is %s, want detached", got)
	}
}

// A volume named after the sample's own detach marker, old name or new, leaves Detach working.
func TestAttackFixedVolumeNameCannotPreemptDetach(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := dockerClient(t, o)
	name := uniqueTask("squat-fixed")
	removeTaskProjects(t, c, name)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(fixedSquatter)})
	s := startSamples(t, task, 1)[0]
	if got := status(t, c, s.Project()); got != backend.StatusAlive {
		t.Fatalf("sample is %s before it is handed over, want alive", got)
	}
	if err := s.Detach(t.Context()); err != nil {
		t.Fatalf("detach: %v", err)
	}
	if got := status(t, c, s.Project()); got != backend.StatusDetached {
		t.Fatalf("handed-over sample is %s, want detached", got)
	}
}
