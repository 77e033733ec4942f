package orchestrator_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The tests named TestFake* run the orchestrator on the in-memory backend: no engine, quick,
// and under -race in `make test`.

const fakeImage = "fake/app:1"

// fakeTwoServices is a project of a default service and a database.
const fakeTwoServices = `
services:
  default:
    image: fake/app:1
    working_dir: /work
    depends_on: [db]
  db:
    image: fake/app:1
`

// events is an observer that hands every event of one kind to a channel, never blocking.
type events struct {
	mu sync.Mutex
	ch map[orchestrator.EventKind]chan orchestrator.Event
}

func (e *events) observe(ev orchestrator.Event) {
	e.mu.Lock()
	ch := e.ch[ev.Kind]
	e.mu.Unlock()
	if ch != nil {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (e *events) of(kind orchestrator.EventKind) chan orchestrator.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ch == nil {
		e.ch = map[orchestrator.EventKind]chan orchestrator.Event{}
	}
	if e.ch[kind] == nil {
		e.ch[kind] = make(chan orchestrator.Event, 64)
	}
	return e.ch[kind]
}

// next waits for an event of kind.
func (e *events) next(t *testing.T, kind orchestrator.EventKind) orchestrator.Event {
	t.Helper()
	select {
	case ev := <-e.of(kind):
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s event within 10s", kind)
		return orchestrator.Event{}
	}
}

// newFake returns a fake backend with the test image and an orchestrator on it; everything is
// cleaned up at the end of the test, and the test fails if a project is left.
func newFake(t *testing.T, opts ...orchestrator.Option) (*fakebackend.Backend, *orchestrator.Orchestrator, *events) {
	t.Helper()
	f := fakebackend.New()
	f.AddImage(fakeImage, nil)
	ev := &events{}
	ev.of(orchestrator.EventPoolWarm)
	o, err := orchestrator.New(append([]orchestrator.Option{orchestrator.WithBackend(f), orchestrator.WithStateDir(t.TempDir()),
		orchestrator.WithObserver(ev.observe)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.SetDown(false)
		if err := o.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if left := f.Projects(); len(left) > 0 {
			t.Errorf("projects left behind: %v", left)
		}
	})
	return f, o, ev
}

func fakeTask(t *testing.T, o *orchestrator.Orchestrator, spec orchestrator.TaskSpec) *orchestrator.Task {
	t.Helper()
	if spec.YAML == nil {
		spec.YAML = []byte(fakeTwoServices)
	}
	task, err := o.TaskInit(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := task.Cleanup(context.Background()); err != nil {
			t.Errorf("task cleanup: %v", err)
		}
	})
	return task
}

func TestFakeSampleLifecycle(t *testing.T) {
	f, o, _ := newFake(t)
	if o.Client() != nil {
		t.Fatal("Client() of a non-Docker backend should be nil")
	}
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "life"})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Default().Service(); got != "default" || len(s.Sandboxes()) != 2 {
		t.Fatalf("default %s, %d sandboxes", got, len(s.Sandboxes()))
	}
	sb := s.Default()
	res, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"echo", "hi"}})
	if err != nil || res.StdoutText() != "hi\n" {
		t.Fatalf("echo: %q %v", res.Stdout, err)
	}
	res, err = sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "exit 3"}})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("a non-zero exit is a result: %d %v", res.ExitCode, err)
	}
	_, err = sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sleep", "60"}, Timeout: 20 * time.Millisecond})
	var ee *orchestrator.ExecError
	if !errors.Is(err, orchestrator.ErrTimeout) || !errors.As(err, &ee) {
		t.Fatalf("timeout: %v", err)
	}
	// Files resolve against the working directory.
	if err := sb.WriteFile(t.Context(), "notes.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(t.Context(), "/work/notes.txt"); err != nil || string(got) != "data" {
		t.Fatalf("read back %q %v", got, err)
	}
	if _, err := sb.ReadFile(t.Context(), "/nope"); !errors.Is(err, orchestrator.ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
	var tarball bytes.Buffer
	if err := sb.ReadDirTo(t.Context(), "/work", &tarball); err != nil {
		t.Fatal(err)
	}
	db, err := s.Sandbox("db")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.WriteDirFrom(t.Context(), "/copy", &tarball); err != nil {
		t.Fatal(err)
	}
	if got, err := db.ReadFile(t.Context(), "/copy/notes.txt"); err != nil || string(got) != "data" {
		t.Fatalf("copied dir: %q %v", got, err)
	}
	// A streaming exec delivers its output as events.
	p, err := sb.ExecStream(t.Context(), orchestrator.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("streamed")})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for e := range p.Events() {
		got = append(got, e.Data...)
	}
	if r, err := p.Wait(); err != nil || r.ExitCode != 0 || string(got) != "streamed" {
		t.Fatalf("stream: %q %d %v", got, r.ExitCode, err)
	}
	// The command to enter the container is the backend's.
	c, err := sb.Connection(t.Context())
	if err != nil || !strings.HasPrefix(c.Command, "fake-exec ") {
		t.Fatalf("connection %+v %v", c, err)
	}
	// Another process's view, from labels alone.
	opened, err := o.Open(t.Context(), s.Project())
	if err != nil || opened.Default().Service() != "default" || opened.ID() != "one" {
		t.Fatalf("open: %v", err)
	}
	ps, err := o.Ps(t.Context(), s.Project())
	if err != nil || len(ps) != 2 || !ps[0].Default || !ps[0].Running() {
		t.Fatalf("ps %+v %v", ps, err)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := f.Projects(); len(left) != 0 {
		t.Fatalf("left after cleanup: %v", left)
	}
	if _, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("exec after cleanup: %v", err)
	}
}

func TestFakeFailedSampleIsTornDown(t *testing.T) {
	f, o, _ := newFake(t)
	f.Exits = map[string]int{"db": 1}
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "failing"})
	_, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if !errors.Is(err, orchestrator.ErrUnavailable) || !strings.Contains(err.Error(), "service db") || !strings.Contains(err.Error(), "exit code 1") {
		t.Fatalf("want unavailable naming db: %v", err)
	}
	if left := f.Projects(); len(left) != 0 {
		t.Fatalf("a failed sample was left: %v", left)
	}
}

func TestFakeTaskCleanupRemovesEverySampleAndRetries(t *testing.T) {
	f, o, _ := newFake(t)
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: "many", YAML: []byte(fakeTwoServices)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(f.Projects()); n != 6 {
		t.Fatalf("%d projects, want 6", n)
	}
	// One sample's removal fails: the cleanup says so (the sweep by labels behind it may
	// still have removed the project), and the next call retries what is left.
	f.FailNext("Down", fakebackend.ErrEngineDown)
	if err := task.Cleanup(t.Context()); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("a teardown that failed is unavailable: %v", err)
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatalf("retried cleanup: %v", err)
	}
	if left := f.Projects(); len(left) != 0 {
		t.Fatalf("left: %v", left)
	}
	if _, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{}); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("sample init after cleanup: %v", err)
	}
}

func TestFakeDaemonLossIsUnavailable(t *testing.T) {
	f, o, _ := newFake(t)
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "loss"})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	f.SetDown(true)
	if _, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("exec on a lost engine: %v", err)
	}
	if _, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{}); !errors.Is(err, orchestrator.ErrUnavailable) || orchestrator.ErrorKind(err) != "unavailable" {
		t.Fatalf("sample init on a lost engine: %v", err)
	}
	if err := s.Cleanup(t.Context()); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("cleanup on a lost engine: %v", err)
	}
	f.SetDown(false)
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatalf("cleanup once the engine is back: %v", err)
	}
}

func TestFakeDetachedSampleOutlivesTaskCleanup(t *testing.T) {
	f, o, _ := newFake(t)
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "detach"})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.Projects(); !slices.Equal(got, []string{s.Project()}) {
		t.Fatalf("projects after task cleanup: %v", got)
	}
	opened, err := o.Open(t.Context(), s.Project())
	if err != nil {
		t.Fatal(err)
	}
	if err := opened.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestFakePoolTakesEachSampleOnce(t *testing.T) {
	f, o, ev := newFake(t)
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "pool", Warm: 3, SharePool: true})
	for range 3 {
		ev.next(t, orchestrator.EventPoolWarm)
	}
	// pool_warm says the sample is in the pool, not on its way there.
	if st := task.PoolStatus(); st.Ready != 3 {
		t.Fatalf("pool after 3 pool_warm: %+v, want 3 ready", st)
	}
	taken := ev.of(orchestrator.EventPoolTaken)
	var mu sync.Mutex
	projects := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if projects[s.Project()] {
				t.Errorf("%s handed out twice", s.Project())
			}
			projects[s.Project()] = true
		})
	}
	wg.Wait()
	if len(taken) == 0 {
		t.Fatal("no sample came from the pool")
	}
	if f.Calls("Take") < len(taken) {
		t.Fatalf("a shared pool's take must win the claim: %d takes for %d taken", f.Calls("Take"), len(taken))
	}
}

func TestFakeClaimIsAtomic(t *testing.T) {
	f := fakebackend.New()
	m := backend.Marker{Project: "cbx-t-1", Task: "t", Sample: "s", Owner: "me"}
	if err := f.MarkWarm(t.Context(), backend.WarmMarker{Marker: m, Fingerprint: "fp", Shared: true}); err != nil {
		t.Fatal(err)
	}
	var won sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 16 {
		won.Go(func() {
			mm := m
			mm.Owner = "taker" + string(rune('a'+i))
			ok, err := f.Claim(t.Context(), mm)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	won.Wait()
	if wins != 1 {
		t.Fatalf("%d claims won, want exactly 1", wins)
	}
}

func TestFakePoolDropsASampleThatDied(t *testing.T) {
	f, o, ev := newFake(t)
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "deaths", Warm: 1})
	first := ev.next(t, orchestrator.EventPoolWarm)
	for _, id := range f.ContainersOf(first.Project) {
		f.Kill(id, 137)
		break
	}
	// The death watch evicts it, and the pool starts another.
	second := ev.next(t, orchestrator.EventPoolWarm)
	if second.Project == first.Project {
		t.Fatalf("the dead sample %s came back", first.Project)
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Project() == first.Project {
		t.Fatal("SampleInit handed out the dead sample")
	}
}

func TestFakePoolDropsASampleThatDiesBeforeItJoins(t *testing.T) {
	// The first pooled sample's containers die as soon as it is ready, before it joins the
	// pool: the observer is called from the refill itself.
	var f *fakebackend.Backend
	var killed sync.Once
	victim := make(chan string, 1)
	ev := &events{}
	ev.of(orchestrator.EventPoolWarm)
	ev.of(orchestrator.EventPoolRefillFailed)
	observe := func(e orchestrator.Event) {
		if e.Kind == orchestrator.EventSampleHealthy {
			killed.Do(func() {
				for _, id := range f.ContainersOf(e.Project) {
					f.Kill(id, 137)
				}
				victim <- e.Project
			})
		}
		ev.observe(e)
	}
	f, o, _ := newFake(t, orchestrator.WithObserver(observe))
	task := fakeTask(t, o, orchestrator.TaskSpec{Name: "early", Warm: 1})
	failed := ev.next(t, orchestrator.EventPoolRefillFailed)
	dead := <-victim
	if !errors.Is(failed.Err, orchestrator.ErrUnavailable) || !strings.Contains(failed.Err.Error(), dead) || !strings.Contains(failed.Err.Error(), "not running") {
		t.Fatalf("refill failed with %v, want the death of %s", failed.Err, dead)
	}
	warm := ev.next(t, orchestrator.EventPoolWarm)
	if warm.Project == dead {
		t.Fatalf("the sample %s that died before it joined the pool was announced warm", dead)
	}
	if st := task.PoolStatus(); st.Ready != 1 {
		t.Fatalf("pool after its pool_warm: %+v, want 1 ready", st)
	}
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Project() != warm.Project {
		t.Fatalf("SampleInit got %s, want the warm %s", s.Project(), warm.Project)
	}
	if _, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
}

// Two tasks of the same name, each with its own observer: each observer gets its own task's
// events (ready, sample started, healthy, removed) and none of the other's; the orchestrator's
// observer still gets them all.
func TestFakeTaskObserverSeesItsOwnTaskOnly(t *testing.T) {
	_, o, all := newFake(t)
	type seen struct {
		mu     sync.Mutex
		events []orchestrator.Event
	}
	observe := func(s *seen) orchestrator.Observer {
		return func(e orchestrator.Event) { s.mu.Lock(); s.events = append(s.events, e); s.mu.Unlock() }
	}
	var a, b seen
	removed := all.of(orchestrator.EventSampleRemoved)
	ta := fakeTask(t, o, orchestrator.TaskSpec{Name: "same", Observer: observe(&a)})
	tb := fakeTask(t, o, orchestrator.TaskSpec{Name: "same", Observer: observe(&b)})
	var projects [2]string
	for i, task := range []*orchestrator.Task{ta, tb} {
		s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
		if err != nil {
			t.Fatal(err)
		}
		projects[i] = s.Project()
		if err := s.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		if e := <-removed; e.Project != s.Project() {
			t.Fatalf("the orchestrator's observer: %+v, want %s removed", e, s.Project())
		}
	}
	for i, s := range []*seen{&a, &b} {
		s.mu.Lock()
		kinds := map[orchestrator.EventKind]bool{}
		for _, e := range s.events {
			if e.Project != "" && e.Project != projects[i] {
				t.Errorf("task %d's observer got an event of the other task's sample: %+v", i, e)
			}
			kinds[e.Kind] = true
		}
		s.mu.Unlock()
		for _, k := range []orchestrator.EventKind{orchestrator.EventTaskReady, orchestrator.EventSampleStarted, orchestrator.EventSampleHealthy, orchestrator.EventSampleRemoved} {
			if !kinds[k] {
				t.Errorf("task %d's observer missed %s: %v", i, k, kinds)
			}
		}
	}
}
