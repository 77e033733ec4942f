package orchestrator_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// newFakeEngines is newFake over several fake engines with the given capacities, the test
// image on the first alone.
func newFakeEngines(t *testing.T, max ...int) ([]*fakebackend.Backend, *orchestrator.Orchestrator, *events) {
	t.Helper()
	var fs []*fakebackend.Backend
	var members []multiengine.Member
	for i, m := range max {
		f := fakebackend.New()
		fs = append(fs, f)
		members = append(members, multiengine.Member{Name: "e" + string(rune('0'+i)), Backend: f, MaxSamples: m})
	}
	fs[0].AddImage(fakeImage, nil)
	mb, err := multiengine.NewFromBackends(members, multiengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	ev.of(orchestrator.EventSamplePlaced)
	o, err := orchestrator.New(orchestrator.WithBackend(mb), orchestrator.WithStateDir(t.TempDir()), orchestrator.WithObserver(ev.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range fs {
			f.SetDown(false)
		}
		if err := o.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		for i, f := range fs {
			if left := f.Projects(); len(left) > 0 {
				t.Errorf("projects left behind on engine %d: %v", i, left)
			}
		}
	})
	return fs, o, ev
}

func TestFakeEnginesSpreadSamples(t *testing.T) {
	fs, o, ev := newFakeEngines(t, 1, 2)
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "spread"})
	var samples []*orchestrator.Sample
	for range 3 {
		s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
		placed := ev.next(t, orchestrator.EventSamplePlaced)
		if placed.Engine != s.Engine() || placed.Project != s.Project() || placed.Message == "" {
			t.Fatalf("sample_placed %+v for a sample on %s", placed, s.Engine())
		}
	}
	// e1 is the less loaded with one more sample (1 of 2 against 1 of 1); then they tie, and
	// the tie goes to fewer samples.
	if samples[0].Engine() != "e1" || samples[1].Engine() != "e0" || samples[2].Engine() != "e1" {
		t.Fatalf("samples on %s, %s, %s; want e1, e0, e1", samples[0].Engine(), samples[1].Engine(), samples[2].Engine())
	}
	if fs[1].Calls("LoadImages") != 1 {
		t.Fatalf("e1 loaded the image %d times, want once", fs[1].Calls("LoadImages"))
	}
	// A fourth has no room: the error says why for each engine.
	_, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	var pe *orchestrator.PlacementError
	if !errors.As(err, &pe) || !errors.Is(err, orchestrator.ErrUnavailable) || !strings.Contains(err.Error(), "e0: full (1 of 1 samples)") {
		t.Fatalf("a sample with every engine full: %v", err)
	}
	// Listings name each project's engine; Open finds a sample where it is.
	listing, err := o.List(t.Context(), orchestrator.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]string{}
	for _, p := range listing.Projects {
		on[p.Name] = p.Engine
	}
	for _, s := range samples {
		if on[s.Project()] != s.Engine() {
			t.Fatalf("ls says %s is on %q, the sample says %s", s.Project(), on[s.Project()], s.Engine())
		}
	}
	opened, err := o.Open(t.Context(), samples[2].Project())
	if err != nil || opened.Engine() != "e1" {
		t.Fatalf("open %s: engine %q, %v", samples[2].Project(), opened.Engine(), err)
	}
	if res, err := opened.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec in the opened sample: %+v %v", res, err)
	}
	// An engine lost: its sample is unavailable, naming it; new samples go elsewhere.
	fs[1].SetDown(true)
	t.Cleanup(func() { fs[1].SetDown(false) }) // before the task's cleanup
	_, err = samples[0].Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}})
	if !errors.Is(err, orchestrator.ErrUnavailable) || !strings.Contains(err.Error(), "engine e1") {
		t.Fatalf("exec on a lost engine: %v, want ErrUnavailable naming e1", err)
	}
	if err := samples[1].Cleanup(context.Background()); err != nil { // e0's
		t.Fatal(err)
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil || s.Engine() != "e0" {
		t.Fatalf("a sample with e1 lost: %v on %q, want e0", err, s.Engine())
	}
}

func TestFakeEnginesPool(t *testing.T) {
	fs, o, _ := newFakeEngines(t, 4, 4)
	ev := &events{}
	o2, err := orchestrator.New(orchestrator.WithBackend(o.Backend()), orchestrator.WithStateDir(t.TempDir()), orchestrator.WithObserver(ev.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o2.Close() })
	ev.of(orchestrator.EventPoolWarm)
	task := fakeTask(t, o2, orchestrator.TaskSpec{Name: "pool", Warm: 3, SharePool: true})
	warm := map[string]bool{}
	for range 3 {
		warm[ev.next(t, orchestrator.EventPoolWarm).Project] = true
	}
	// A death on either engine reaches the pool's watch, which replaces the sample.
	var dead string
	for p := range warm {
		if slices.Contains(fs[1].Projects(), p) {
			dead = p
		}
	}
	if dead == "" {
		t.Fatalf("no pooled sample on e1: e0 %v, e1 %v", fs[0].Projects(), fs[1].Projects())
	}
	for _, id := range fs[1].ContainersOf(dead) {
		fs[1].Kill(id, 137)
	}
	if again := ev.next(t, orchestrator.EventPoolWarm); again.Project == dead {
		t.Fatalf("the dead sample %s came back", dead)
	}
	for range 3 {
		s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Project() == dead {
			t.Fatal("SampleInit handed out the dead sample")
		}
		i := slices.IndexFunc(fs, func(f *fakebackend.Backend) bool { return slices.Contains(f.Projects(), s.Project()) })
		if i < 0 || s.Engine() != "e"+string(rune('0'+i)) {
			t.Fatalf("sample %s says engine %q, found on engine %d", s.Project(), s.Engine(), i)
		}
		// The claim went to the sample's own engine.
		if fs[i].Calls("Take") == 0 {
			t.Fatalf("no claim on e%d, which holds %s", i, s.Project())
		}
	}
}

// TestFakeEnginesRefuseEgressTheyCannotEnforce: over several engines, a task with an egress
// allowlist is refused when an engine could not enforce it (here, fakes without egress), naming
// that engine, rather than placed where its services would reach the whole internet.
func TestFakeEnginesRefuseEgressTheyCannotEnforce(t *testing.T) {
	fs, o, _ := newFakeEngines(t, 2, 2)
	p := compose.DefaultPolicy()
	p.Egress = []string{"pkgs.test"}
	_, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: "egress-engines", YAML: []byte(fakeTwoServices), Policy: &p})
	var ee *backend.EngineError
	if !errors.As(err, &ee) || !errors.Is(err, errors.ErrUnsupported) || ee.Engine != "e0" {
		t.Fatalf("TaskInit of a restricted task over engines without egress = %v, want an unsupported error naming engine e0", err)
	}
	for _, f := range fs {
		if left := f.Projects(); len(left) > 0 {
			t.Errorf("a refused task left projects: %v", left)
		}
	}
}
