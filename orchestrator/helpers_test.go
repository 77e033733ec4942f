package orchestrator_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/orchestrator"
)

// dockerClient is the Engine API client of o's backend, the Docker one New made, through which
// a test looks at (and attacks) what the library made beside it.
func dockerClient(t testing.TB, o *orchestrator.Orchestrator) client.APIClient {
	t.Helper()
	d, ok := o.Backend().(*dockerbackend.Backend)
	if !ok {
		t.Fatalf("backend %s: not a Docker engine", o.Backend().Kind())
	}
	return d.Client()
}

// project is the path of a testdata project.
func project(name string) string {
	// Relative to the package's directory, where go test runs it: a -trimpath build's
	// source paths are module paths, not the checkout's.
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "projects", name))
	if err != nil {
		panic(err)
	}
	return dir
}

// recorder collects events.
type recorder struct {
	mu     sync.Mutex
	events []orchestrator.Event
}

func (r *recorder) observe(e orchestrator.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) count(kind orchestrator.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// readyTimes is when each service of project became ready, from service_ready events.
func (r *recorder) readyTimes(project string) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for _, e := range r.events {
		if _, seen := out[e.Service]; !seen && e.Kind == orchestrator.EventServiceReady && e.Project == project {
			out[e.Service] = e.Time
		}
	}
	return out
}

// newOrchestrator returns an orchestrator whose state lives in the test's temp dir, closed at
// the end of the test.
func newOrchestrator(t *testing.T, opts ...orchestrator.Option) (*orchestrator.Orchestrator, *recorder) {
	t.Helper()
	testutil.Docker(t)
	rec := &recorder{}
	opts = append([]orchestrator.Option{orchestrator.WithStateDir(t.TempDir()), orchestrator.WithObserver(rec.observe)}, opts...)
	o, err := orchestrator.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o, rec
}

// taskInit starts a task whose samples are all removed at the end of the test.
func taskInit(t *testing.T, o *orchestrator.Orchestrator, spec orchestrator.TaskSpec) *orchestrator.Task {
	t.Helper()
	task, err := o.TaskInit(t.Context(), spec)
	if err != nil {
		t.Fatalf("task init: %v", err)
	}
	t.Cleanup(func() {
		if err := task.Cleanup(context.Background()); err != nil {
			t.Errorf("task cleanup: %v", err)
		}
	})
	return task
}

// startSamples starts n samples of task at once, each removed at the end of the test (the
// cleanups are registered before anything is asserted), and fails the test if any did not start.
func startSamples(t *testing.T, task *orchestrator.Task, n int) []*orchestrator.Sample {
	t.Helper()
	samples := make([]*orchestrator.Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { samples[i], errs[i] = task.SampleInit(t.Context(), orchestrator.SampleSpec{}) })
	}
	wg.Wait()
	for _, s := range samples {
		if s != nil {
			t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	return samples
}

func projectLabel(p string) string { return labels.ComposeProjectLabel + "=" + p }
