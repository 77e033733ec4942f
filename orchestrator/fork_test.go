package orchestrator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/orchestrator"
)

// forkTask is two services: the default sandbox, and web serving a named volume over HTTP.
const forkTask = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      web: {condition: service_healthy}
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "touch /www/index.html && exec httpd -f -p 80 -h /www"]
    volumes: ["site:/www"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/"]
      interval: 1s
      retries: 30
volumes:
  site: {}
`

// sh runs script in sb and returns its stdout, failing the test unless it exits 0.
func sh(t *testing.T, sb *orchestrator.Sandbox, script string) string {
	t.Helper()
	res, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("%s in %s: %v", script, sb.Project(), err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s in %s: exit %d: %s", script, sb.Project(), res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

func sandbox(t *testing.T, s *orchestrator.Sample, service string) *orchestrator.Sandbox {
	t.Helper()
	sb, err := s.Sandbox(service)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// stateLeft counts the snapshot images tagged for project and the volumes of its snapshots.
func stateLeft(t *testing.T, o *orchestrator.Orchestrator, project string) int {
	t.Helper()
	c := o.Client()
	imgs, err := c.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", cleanup.StateRepo(project)))})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := c.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "com.docker.compose.project="+project))})
	if err != nil {
		t.Fatal(err)
	}
	return len(imgs) + len(vols.Volumes)
}

func TestForkThreeWaysCopiesFilesAndVolumesIntoOwnNetworks(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "fork", YAML: []byte(forkTask)})
	src := startSamples(t, task, 1)[0]
	sh(t, src.Default(), "mkdir -p /root/work && echo source-notes > /root/work/notes")
	sh(t, sandbox(t, src, "web"), "echo page-v1 > /www/page && echo layer > /etc/web-layer")

	forks, err := src.Fork(t.Context(), 3)
	for _, f := range forks {
		t.Cleanup(func() { _ = f.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(forks) != 3 {
		t.Fatalf("%d forks, want 3", len(forks))
	}
	// The source runs on, unpaused, and what it changes now is its own.
	sh(t, sandbox(t, src, "web"), "echo page-v2 > /www/page")
	seen := map[string]bool{src.Project(): true}
	for i, f := range forks {
		if seen[f.Project()] {
			t.Fatalf("fork %d has project %s, taken already", i, f.Project())
		}
		seen[f.Project()] = true
		if got := sh(t, f.Default(), "cat /root/work/notes"); got != "source-notes\n" {
			t.Errorf("fork %d: notes %q", i, got)
		}
		web := sandbox(t, f, "web")
		if got := sh(t, web, "cat /etc/web-layer /www/page"); got != "layer\npage-v1\n" {
			t.Errorf("fork %d: web's files %q, want the layer and the volume at the fork", i, got)
		}
		// Each fork's name "web" is its own web: mark it, and read it over the fork's network.
		mark := "fork-" + f.Project()
		sh(t, web, "echo "+mark+" > /www/who")
		if got := sh(t, f.Default(), "wget -q -O - http://web/who"); got != mark+"\n" {
			t.Errorf("fork %d: web resolves to a server saying %q, want its own (%s)", i, got, mark)
		}
	}
	if got := sh(t, src.Default(), "wget -q -O - http://web/page; wget -q -O - http://web/who || echo no-who"); got != "page-v2\nno-who\n" {
		t.Errorf("the source's web serves %q: a fork's write reached it", got)
	}

	// A fork goes with its Cleanup, tags and volumes included; the source's cut went with the
	// fork's return.
	for _, f := range forks {
		if err := f.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := stateLeft(t, o, f.Project()); n != 0 {
			t.Errorf("fork %s left %d images or volumes", f.Project(), n)
		}
	}
	imgs, err := o.Client().ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", cleanup.StateRepo(src.Project())))})
	if err != nil || len(imgs) != 0 {
		t.Errorf("the cut's images outlived the fork: %d (%v)", len(imgs), err)
	}
}

func TestSnapshotResetAndSampleFrom(t *testing.T) {
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "reset", YAML: []byte(forkTask)})
	s := startSamples(t, task, 1)[0]
	sh(t, s.Default(), "echo one > /root/state")
	sh(t, sandbox(t, s, "web"), "echo one > /www/page")
	snap, err := s.Snapshot(t.Context(), "start")
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s.Default(), "echo two > /root/state; echo junk > /root/junk")
	sh(t, sandbox(t, s, "web"), "echo two > /www/page")
	before := s.Default().ContainerID()

	if err := s.Reset(t.Context(), "start"); err != nil {
		t.Fatal(err)
	}
	if s.Default().ContainerID() == before {
		t.Error("reset kept the old container")
	}
	if got := sh(t, s.Default(), "cat /root/state; test -e /root/junk && echo junk-stayed; wget -q -O - http://web/page"); got != "one\none\n" {
		t.Errorf("after reset: %q, want the snapshot's files and volume", got)
	}
	// Twice: a reset replaces what the previous one ran.
	sh(t, s.Default(), "echo three > /root/state")
	if err := s.Reset(t.Context(), "start"); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, s.Default(), "cat /root/state"); got != "one\n" {
		t.Errorf("after a second reset: %q", got)
	}
	if err := s.Reset(t.Context(), "nonesuch"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Errorf("reset to an unknown snapshot: %v, want not found", err)
	}

	n, err := task.SampleFrom(t.Context(), snap, orchestrator.SampleSpec{})
	if n != nil {
		t.Cleanup(func() { _ = n.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, n.Default(), "cat /root/state; wget -q -O - http://web/page"); got != "one\none\n" {
		t.Errorf("sample from the snapshot: %q", got)
	}
	if err := n.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The snapshot is the sample's: it goes with it, and nothing of it outlives it.
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.Project(), n.Project()} {
		if left := stateLeft(t, o, p); left != 0 {
			t.Errorf("%s left %d snapshot images or volumes", p, left)
		}
	}
	if !strings.HasPrefix(snap.Project(), "cbx-reset-") {
		t.Errorf("snapshot project %q", snap.Project())
	}
}
