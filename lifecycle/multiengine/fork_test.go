package multiengine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
	"github.com/composebox/composebox/orchestrator"
)

// forkTask keeps a file in its container's filesystem and one in a named volume.
const forkTask = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["data:/data"]
volumes:
  data: {}
`

// Over two engines (private daemons a and b; the host's engine only lends the base image),
// fork, snapshot and reset of a sample on b happen on b: the fork is placed on b whatever the
// loads say, it has the source's files and volume as they were at the cut and none of the
// source's later writes, the source goes back to its snapshot, and nothing of the task is left
// on any engine at cleanup, snapshot images included.
func TestForkSnapshotResetOnTheSourcesEngine(t *testing.T) {
	host := testutil.Docker(t)
	testutil.BaseImage(t)
	daemons := map[string]*dockerd.Daemon{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		wg.Go(func() {
			d := testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxf" + name})
			mu.Lock()
			daemons[name] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() || t.Skipped() || len(daemons) != 2 {
		t.FailNow()
	}
	clients := map[string]client.APIClient{"host": host}
	for name, d := range daemons {
		c, err := d.Client()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[name] = c
	}
	workers := map[string]string{"role": "fork-worker"}
	task := fmt.Sprintf("multifork-%d", time.Now().UnixNano()%1e6)
	var projects []string // the task's samples, whose snapshot images must go with them
	// Registered first, so that it runs after the task's own cleanup.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for name, c := range clients {
			n, err := testutil.Count(ctx, c, filters.Arg("label", labels.LabelTask+"="+task))
			if err != nil {
				t.Errorf("count what task %s left on engine %s: %v", task, name, err)
			}
			var states int
			for _, p := range projects {
				imgs, err := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", cleanup.StateRepo(p)))})
				if err != nil {
					t.Errorf("list the snapshot images of %s on engine %s: %v", p, name, err)
				}
				states += len(imgs)
			}
			if n > 0 || states > 0 {
				t.Errorf("engine %s: task %s left %d containers, networks or volumes and %d snapshot images", name, task, n, states)
			}
		}
	})
	o, err := orchestrator.New(orchestrator.WithStateDir(t.TempDir()), orchestrator.WithEngines(
		orchestrator.EngineConfig{Name: "host", Endpoint: host.DaemonHost(), Labels: map[string]string{"role": "source"}},
		orchestrator.EngineConfig{Name: "a", Endpoint: daemons["a"].Endpoint(), Labels: workers, SubnetPool: "10.225.0.0/16"},
		orchestrator.EngineConfig{Name: "b", Endpoint: daemons["b"].Endpoint(), Labels: workers, SubnetPool: "10.226.0.0/16"},
	))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	ctx := t.Context()
	tk, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: task, EngineLabels: workers, YAML: []byte(forkTask)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tk.Cleanup(context.Background()); err != nil {
			t.Errorf("task cleanup: %v", err)
		}
	})

	// One sample on each worker (the least loaded takes the next): the source is b's.
	var src *orchestrator.Sample
	for range 2 {
		s, err := tk.SampleInit(ctx, orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		projects = append(projects, s.Project())
		if s.Engine() == "b" {
			src = s
		}
	}
	if src == nil {
		t.Fatal("no sample was placed on engine b")
	}
	sh := func(s *orchestrator.Sample, script string) string {
		t.Helper()
		res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s in %s: %v, exit %d: %s", script, s.Project(), err, res.ExitCode, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	read := "cat /root/f /data/f"
	sh(src, "echo before > /root/f && echo before > /data/f")
	if _, err := src.Snapshot(ctx, "base"); err != nil {
		t.Fatalf("snapshot on engine b: %v", err)
	}
	forks, err := src.Fork(ctx, 1)
	for _, f := range forks {
		t.Cleanup(func() { _ = f.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatalf("fork on engine b: %v", err)
	}
	fork := forks[0]
	projects = append(projects, fork.Project())
	if fork.Engine() != "b" {
		t.Errorf("the fork of a sample on b is on engine %q", fork.Engine())
	}
	for name, c := range clients {
		n := testutil.Resources(t, c, labels.ComposeProjectLabel+"="+fork.Project())
		if (name == "b") != (n > 0) {
			t.Errorf("engine %s has %d resources of the fork %s; want them on b alone", name, n, fork.Project())
		}
	}
	sh(src, "echo after > /root/f && echo after > /data/f")
	if got := sh(fork, read); got != "before\nbefore" {
		t.Errorf("the fork reads %q, want the files as they were at the cut", got)
	}
	if err := src.Reset(ctx, "base"); err != nil {
		t.Fatalf("reset on engine b: %v", err)
	}
	if got := sh(src, read); got != "before\nbefore" {
		t.Errorf("the source reads %q after its reset, want its snapshot's files", got)
	}
	if src.Engine() != "b" {
		t.Errorf("the source moved to engine %q", src.Engine())
	}
	r, err := o.Doctor(ctx, orchestrator.DoctorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, c := range r.Checks {
		if c.Name == "fork" {
			line = c.String()
		}
	}
	if !strings.HasPrefix(line, "[pass] fork: ") || !strings.Contains(line, "over 3 engines") {
		t.Errorf("doctor's fork line %q: want it to pass over the 3 engines", line)
	}
}
