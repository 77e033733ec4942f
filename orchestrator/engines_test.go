package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/internal/conformance/orchestrated"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
	"github.com/composebox/composebox/orchestrator"
)

// engineRig is the host's engine and two private ones: a on a Unix socket, b on loopback TCP
// with TLS (certificates made for the test). The host's engine is the source of the base
// image and takes no sample of these tests (its labels do not match what their tasks ask):
// other tests' samples run there, and would skew its count.
type engineRig struct {
	host    client.APIClient
	a, b    *dockerd.Daemon
	clients map[string]client.APIClient
	configs []orchestrator.EngineConfig
}

// workers are the labels of the private engines, which the tasks of these tests ask for.
var workers = map[string]string{"role": "worker"}

func newEngineRig(t *testing.T) *engineRig {
	t.Helper()
	r := &engineRig{host: testutil.Docker(t)}
	testutil.BaseImage(t) // on the host's engine alone
	var wg sync.WaitGroup
	wg.Go(func() { r.a = testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxea"}) })
	wg.Go(func() { r.b = testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxeb", TLS: true}) })
	wg.Wait()
	if t.Failed() || t.Skipped() || r.a == nil || r.b == nil {
		t.FailNow()
	}
	r.clients = map[string]client.APIClient{"host": r.host}
	for name, d := range map[string]*dockerd.Daemon{"a": r.a, "b": r.b} {
		c, err := d.Client()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		r.clients[name] = c
	}
	r.configs = []orchestrator.EngineConfig{
		{Name: "host", Endpoint: r.host.DaemonHost(), Labels: map[string]string{"role": "source"}},
		// The private engines share this host's routes: pools of their own, clear of the
		// host engine's and of other tests'.
		{Name: "a", Endpoint: r.a.Endpoint(), Labels: workers, MaxSamples: 2, SubnetPool: "10.221.0.0/16"},
		{Name: "b", Endpoint: "tcp://" + r.b.TCP, TLS: r.b.ClientCerts, Labels: workers, MaxSamples: 3, SubnetPool: "10.222.0.0/16"},
	}
	return r
}

// orchestrator returns an orchestrator over the rig's engines, closed at the end of the test.
func (r *engineRig) orchestrator(t *testing.T, opts ...orchestrator.Option) (*orchestrator.Orchestrator, *recorder) {
	t.Helper()
	return newOrchestrator(t, append([]orchestrator.Option{orchestrator.WithEngines(r.configs...)}, opts...)...)
}

// left counts what a task left on each engine. It runs in cleanups too, after the test's
// context ended.
func (r *engineRig) left(t *testing.T, task string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]int{}
	for name, c := range r.clients {
		n, err := testutil.Count(ctx, c, filters.Arg("label", labels.LabelTask+"="+task))
		if err != nil {
			t.Errorf("count what task %s left on engine %s: %v", task, name, err)
		}
		if n > 0 {
			out[name] = n
		}
	}
	return out
}

// task starts a task of engineTask named after what, and checks at the end of the test that
// it left nothing on any engine.
func (r *engineRig) task(t *testing.T, o *orchestrator.Orchestrator, what string) (*orchestrator.Task, string) {
	t.Helper()
	name := fmt.Sprintf("engines-%s-%d", what, time.Now().UnixNano()%1e6)
	t.Cleanup(func() {
		if left := r.left(t, name); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	return taskInit(t, o, engineTask(name)), name
}

// engineTask is a task of the base image that asks for the worker engines.
func engineTask(name string) orchestrator.TaskSpec {
	return orchestrator.TaskSpec{Name: name, EngineLabels: workers, YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`)}
}

// TestEngines runs samples over the host's engine and two private ones. The private engines
// start empty: the base image reaches them from the host's engine, streamed.
func TestEngines(t *testing.T) {
	r := newEngineRig(t)
	ctx := t.Context()

	t.Run("tls is required", func(t *testing.T) {
		// From the attacker's side: the TCP port does not answer a client without the
		// certificates the test made.
		c, err := engine.Endpoint{Host: "tcp://" + r.b.TCP}.Client()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := engine.Ping(ctx, c, 5*time.Second); err == nil {
			t.Fatal("engine b answered a client without TLS certificates")
		}
	})

	t.Run("spread by capacity, images streamed, ls and cleanup over every engine", func(t *testing.T) {
		o, rec := r.orchestrator(t)
		task, name := r.task(t, o, "spread")
		samples := startSamples(t, task, 5)
		on := map[string]int{}
		for _, s := range samples {
			on[s.Engine()]++
			res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"echo", "on", s.Engine()}})
			if err != nil || res.StdoutText() != "on "+s.Engine()+"\n" {
				t.Fatalf("exec in a sample on %s: %q %v", s.Engine(), res.StdoutText(), err)
			}
		}
		if on["a"] != 2 || on["b"] != 3 {
			t.Fatalf("5 samples on engines of capacity 2 (a) and 3 (b) went %v", on)
		}
		if n := rec.count(orchestrator.EventSamplePlaced); n != 5 {
			t.Fatalf("%d sample_placed events for 5 samples", n)
		}
		// The base image was only on the host's engine: it reached both.
		for _, e := range []string{"a", "b"} {
			ref := task.Project().Services["default"].Image
			if _, err := r.clients[e].ImageInspect(ctx, ref); err != nil {
				t.Fatalf("the base image %s is not on engine %s: %v", ref, e, err)
			}
		}
		// A sixth: every engine refuses it, each saying why.
		_, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
		var pe *orchestrator.PlacementError
		if !errors.As(err, &pe) || !errors.Is(err, orchestrator.ErrUnavailable) {
			t.Fatalf("a sixth sample: %v, want a PlacementError", err)
		}
		for _, want := range []string{"host: labels do not match", "a: full (2 of 2 samples)", "b: full (3 of 3 samples)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error lacks %q: %v", want, err)
			}
		}

		// ls and cleanup from a fresh orchestrator (another process, as the CLI is) cover
		// every engine.
		fresh, _ := r.orchestrator(t)
		listing, err := fresh.List(ctx, orchestrator.ListOptions{Task: name})
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]string{}
		for _, p := range listing.Projects {
			listed[p.Name] = p.Engine
		}
		for _, s := range samples {
			if listed[s.Project()] != s.Engine() {
				t.Fatalf("ls: %s on %q, want %s (all: %v)", s.Project(), listed[s.Project()], s.Engine(), listed)
			}
		}
		opened, err := fresh.Open(ctx, samples[4].Project())
		if err != nil || opened.Engine() != samples[4].Engine() {
			t.Fatalf("open from a fresh orchestrator: %v on %q", err, opened.Engine())
		}
		if res, err := opened.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec after open: %+v %v", res, err)
		}
		rep, err := fresh.Prune(ctx, orchestrator.PruneOptions{All: true, Task: name})
		if err != nil {
			t.Fatal(err)
		}
		removed := map[string]int{}
		for _, p := range rep.Projects {
			removed[p.Engine]++
		}
		if removed["a"] != 2 || removed["b"] != 3 {
			t.Fatalf("cleanup --all --task removed %v, want 2 on a and 3 on b", removed)
		}
		if left := r.left(t, name); len(left) > 0 {
			t.Fatalf("left after cleanup: %v", left)
		}
	})

	t.Run("conformance on a private engine", func(t *testing.T) {
		o, _ := r.orchestrator(t)
		tasks := map[string]*orchestrator.Task{}
		for _, user := range conformance.Users {
			spec := engineTask("engines-conformance-" + user)
			spec.YAML = conformanceYAML(user)
			tasks[user] = taskInit(t, o, spec)
		}
		// Where each sandbox's container is, for the cases that kill it.
		var mu sync.Mutex
		where := map[string]string{}
		conformance.Run(t, func(t *testing.T, user string) conformance.Sandbox {
			s, err := tasks[user].SampleInit(t.Context(), orchestrator.SampleSpec{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
			if s.Engine() != "a" && s.Engine() != "b" {
				t.Fatalf("conformance sample on %q, want a private engine", s.Engine())
			}
			mu.Lock()
			where[s.Default().ContainerID()] = s.Engine()
			mu.Unlock()
			return orchestrated.Sandbox{Sandbox: s.Default()}
		}, conformance.WithKill(func(t *testing.T, sb conformance.Sandbox) {
			mu.Lock()
			c := r.clients[where[sb.ContainerID()]]
			mu.Unlock()
			if err := c.ContainerKill(t.Context(), sb.ContainerID(), "KILL"); err != nil {
				t.Fatalf("kill container: %v", err)
			}
			if err := testutil.WaitStopped(t.Context(), c, sb.ContainerID(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}))
	})

	t.Run("an engine lost mid-run", func(t *testing.T) {
		o, _ := r.orchestrator(t)
		task, name := r.task(t, o, "loss")
		samples := startSamples(t, task, 3)
		var onA, onB *orchestrator.Sample
		for _, s := range samples {
			switch s.Engine() {
			case "a":
				onA = s
			case "b":
				onB = s
			}
		}
		if onA == nil || onB == nil {
			t.Fatalf("3 samples did not reach both private engines")
		}

		r.a.Stop()
		t.Cleanup(func() { _ = r.a.Start() }) // a stopped daemon is started again, so that its Remove finds it whole

		_, err := onA.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		if !errors.Is(err, orchestrator.ErrUnavailable) || !strings.Contains(err.Error(), "engine a") {
			t.Fatalf("exec in a sample of the stopped engine: %v, want ErrUnavailable naming engine a", err)
		}
		if res, err := onB.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec on the engine still up: %+v %v", res, err)
		}
		s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
		if err != nil || s.Engine() != "b" {
			t.Fatalf("a new sample with engine a stopped: %v on %q, want b", err, s.Engine())
		}
		listing, err := o.List(ctx, orchestrator.ListOptions{Task: name})
		if err == nil || !strings.Contains(err.Error(), "engine a") || len(listing.Projects) == 0 {
			t.Fatalf("ls with engine a stopped: %d projects, %v; want b's, and an error naming a", len(listing.Projects), err)
		}

		if err := r.a.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Prune(ctx, orchestrator.PruneOptions{All: true, Task: name}); err != nil {
			t.Fatalf("cleanup once engine a is back: %v", err)
		}
		if left := r.left(t, name); len(left) > 0 {
			t.Fatalf("left after cleanup: %v", left)
		}
	})
}
