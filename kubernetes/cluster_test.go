package kubernetes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
)

// keepAlive is a one-service project of the base image that is up at once.
const keepAlive = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

const twoServices = keepAlive + `
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

func uniqueTask(name string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "cbxk-" + name + "-" + hex.EncodeToString(b[:])
}

// cluster is the test's view of the cluster: the backend under test (as the documented
// service account) and an admin client that plays the world around it.
type cluster struct {
	env   k8stest.Env
	b     *kubernetes.Backend
	admin k8s.Interface
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	b := newBackend(t)
	env := k8stest.Load(t)
	_, admin := env.Client(t)
	return &cluster{env: env, b: b, admin: admin}
}

// orchestrator is an orchestrator on the cluster's backend, closed at the end of the test.
func (c *cluster) orchestrator(t *testing.T, opts ...orchestrator.Option) *orchestrator.Orchestrator {
	t.Helper()
	o, err := orchestrator.New(append([]orchestrator.Option{orchestrator.WithBackend(c.b), orchestrator.WithStateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

func taskInit(t *testing.T, o *orchestrator.Orchestrator, spec orchestrator.TaskSpec) *orchestrator.Task {
	t.Helper()
	task, err := o.TaskInit(t.Context(), spec)
	if err != nil {
		t.Fatalf("task init %s: %v", spec.Name, err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	return task
}

func sampleInit(t *testing.T, task *orchestrator.Task, spec orchestrator.SampleSpec) *orchestrator.Sample {
	t.Helper()
	s, err := task.SampleInit(t.Context(), spec)
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatalf("sample init: %v", err)
	}
	return s
}

// namespaces are the namespaces of task's samples, by name, with their pool label.
func (c *cluster) namespaces(t *testing.T, task string) map[string]string {
	t.Helper()
	list, err := c.admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: labels.LabelTask + "=" + task})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ns := range list.Items {
		if ns.DeletionTimestamp == nil {
			out[ns.Name] = ns.Labels[labels.LabelPool]
		}
	}
	return out
}

// eventually polls cond, failing after a minute: for what the cluster converges to on its own.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := k8stest.Poll(t.Context(), time.Minute, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: not within a minute", what)
	}
}

func wantUnavailable(t *testing.T, op string, err error, mention ...string) {
	t.Helper()
	if !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("%s: %v, want ErrUnavailable", op, err)
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("%s: %v does not mention %q", op, err, m)
		}
	}
}

// A pod killed under a sample (its process, as a crash or the OOM killer would) or deleted
// makes the sample unavailable, as a killed container does on Docker: calls on already opened
// sandboxes and a new Open answer ErrUnavailable with the diagnosis. Cleanup still removes
// the sample, leaving no namespace.
func TestKilledPodMakesSampleUnavailable(t *testing.T) {
	c := newCluster(t)
	o := c.orchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("dead"), YAML: []byte(twoServices)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	opened, err := o.Open(t.Context(), s.Project())
	if err != nil {
		t.Fatal(err)
	}
	var side *orchestrator.Sandbox
	for _, sb := range opened.Sandboxes() {
		if sb.Service() == "side" {
			side = sb
		}
	}
	c.env.KillContainer(t, c.admin, s.Project(), "default")
	_, err = opened.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}})
	wantUnavailable(t, "exec in the killed pod", err, "exited", "137")
	_, err = opened.Default().ReadFile(t.Context(), "/etc/hostname")
	wantUnavailable(t, "read in the killed pod", err, "/etc/hostname")
	_, err = opened.Default().ExecStream(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}})
	wantUnavailable(t, "exec stream in the killed pod", err, "exited")
	_, err = o.Open(t.Context(), s.Project())
	wantUnavailable(t, "open", err, "default")

	zero := int64(0)
	if err := c.admin.CoreV1().Pods(s.Project()).Delete(t.Context(), "side", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := k8stest.WaitPodStopped(t.Context(), c.admin, s.Project(), "side"); err != nil {
		t.Fatal(err)
	}
	_, err = side.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}})
	wantUnavailable(t, "exec in the deleted pod", err)

	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatalf("cleanup of the dead sample: %v", err)
	}
	if _, err := c.admin.CoreV1().Namespaces().Get(t.Context(), s.Project(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after cleanup: %v", err)
	}
}

// The death watch reports a pod killed or deleted under it, and nothing for a live one.
func TestWatchDeaths(t *testing.T) {
	c := newCluster(t)
	o := c.orchestrator(t)
	name := uniqueTask("watch")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(twoServices)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	deaths, errs := c.b.WatchDeaths(ctx, backend.WatchOptions{Labels: []string{labels.LabelTask + "=" + name}, Since: time.Now()})
	c.env.KillContainer(t, c.admin, s.Project(), "side")
	select {
	case d := <-deaths:
		if d.Project != s.Project() || d.ContainerID != s.Project()+"/side" {
			t.Fatalf("death %+v, want %s/side", d, s.Project())
		}
	case err := <-errs:
		t.Fatalf("the watch ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no death reported within a minute of the kill")
	}
	zero := int64(0)
	if err := c.admin.CoreV1().Pods(s.Project()).Delete(t.Context(), "default", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-deaths:
		if d.ContainerID != s.Project()+"/default" {
			t.Fatalf("death %+v, want %s/default", d, s.Project())
		}
	case <-time.After(time.Minute):
		t.Fatal("no death reported within a minute of the deletion")
	}
	cancel()
	for range deaths {
	}
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v, want context.Canceled", err)
	}
}

// A warm pool works on the cluster: the pool's sample waits marked warm on its namespace; a
// pod killed while it waits is dropped by the death watch and replaced; SampleInit takes the
// replacement, which is then marked claimed; Task.Cleanup leaves no namespace of the task.
func TestWarmPoolOnKubernetes(t *testing.T) {
	c := newCluster(t)
	var taken atomic.Int32
	o := c.orchestrator(t, orchestrator.WithObserver(func(e orchestrator.Event) {
		if e.Kind == orchestrator.EventPoolTaken {
			taken.Add(1)
		}
	}))
	name := uniqueTask("pool")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive), Warm: 1})
	warm := func() string {
		for ns, pool := range c.namespaces(t, name) {
			if pool == labels.PoolWarm {
				return ns
			}
		}
		return ""
	}
	eventually(t, "a warm sample", func() bool { return task.PoolStatus().Ready == 1 && warm() != "" })
	victim := warm()
	listed, err := c.b.WarmProjects(t.Context(), name)
	if err != nil || len(listed) != 1 || listed[0].Project != victim || listed[0].Fingerprint == "" {
		t.Fatalf("warm projects %+v, %v; want %s", listed, err, victim)
	}
	c.env.KillContainer(t, c.admin, victim, "default")
	eventually(t, "the dead sample replaced", func() bool {
		_, still := c.namespaces(t, name)[victim]
		w := warm()
		return !still && w != "" && w != victim && task.PoolStatus().Ready == 1
	})
	refill := warm()
	s := sampleInit(t, task, orchestrator.SampleSpec{ID: "taker"})
	if s.Project() != refill || taken.Load() != 1 {
		t.Fatalf("took %s (pool_taken %d), want the warm %s", s.Project(), taken.Load(), refill)
	}
	if r, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec in the taken sample: %+v %v", r, err)
	}
	eventually(t, "the take recorded", func() bool { return c.namespaces(t, name)[refill] == labels.PoolClaimed })
	listing, err := o.List(t.Context(), orchestrator.ListOptions{Task: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range listing.Projects {
		if p.Name == refill && (p.Pool != labels.PoolClaimed || p.Sample != "taker" || p.Status != backend.StatusAlive || p.Containers != 1 || p.Running != 1 || p.Health != "ok") {
			t.Errorf("ls of the taken sample: %+v", p)
		}
	}
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := c.namespaces(t, name); len(left) != 0 {
		t.Fatalf("namespaces of the task after Task.Cleanup: %v", left)
	}
}

// sharedKeeperEnv names the task TestHelperSharedPoolKeeper keeps a shared pool of: set, this
// test binary runs as that other process.
const sharedKeeperEnv = "CBX_TEST_K8S_SHARED_TASK"

// sharedKeeperDirEnv is the task directory both processes load: a pool is shared only between
// tasks of one configuration, and a task's directory is part of it.
const sharedKeeperDirEnv = "CBX_TEST_K8S_SHARED_DIR"

// TestHelperSharedPoolKeeper is the other process of TestSharedPoolTakenByAnotherProcess: it
// keeps a shared warm pool of one sample, prints CBX-READY once it is full, and ends (its task
// cleaned up) when its stdin closes.
func TestHelperSharedPoolKeeper(t *testing.T) {
	name := os.Getenv(sharedKeeperEnv)
	if name == "" {
		t.Skip("helper process of TestSharedPoolTakenByAnotherProcess")
	}
	c := newCluster(t)
	keeper := taskInit(t, c.orchestrator(t), orchestrator.TaskSpec{Name: name, Path: os.Getenv(sharedKeeperDirEnv), Warm: 1, SharePool: true})
	eventually(t, "a warm sample", func() bool { return keeper.PoolStatus().Ready == 1 })
	fmt.Println("CBX-READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// Another process's shared pool is taken: the pool is kept by this test binary run again as
// TestHelperSharedPoolKeeper (an owner is a process, so two orchestrators of one process
// would not do).
func TestSharedPoolTakenByAnotherProcess(t *testing.T) {
	c := newCluster(t)
	name := uniqueTask("shared")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(keepAlive), 0o644); err != nil {
		t.Fatal(err)
	}
	// The keeper ends by itself, removing its task, once the test ends.
	testutil.StartHelper(t, "TestHelperSharedPoolKeeper", []string{sharedKeeperEnv + "=" + name, sharedKeeperDirEnv + "=" + dir},
		"CBX-READY", 3*time.Minute)

	taker := taskInit(t, c.orchestrator(t), orchestrator.TaskSpec{Name: name, Path: dir, TakeShared: true})
	warm, err := c.b.WarmProjects(t.Context(), name)
	if err != nil || len(warm) != 1 || !warm[0].Shared {
		t.Fatalf("warm projects %+v, %v", warm, err)
	}
	s := sampleInit(t, taker, orchestrator.SampleSpec{ID: "other-process"})
	if s.Project() != warm[0].Project {
		t.Fatalf("took %s, want the shared %s", s.Project(), warm[0].Project)
	}
	if got := c.namespaces(t, name)[s.Project()]; got != labels.PoolClaimed {
		t.Fatalf("pool label %q after the take, want claimed", got)
	}
	if r, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec in the taken sample: %+v %v", r, err)
	}
}

// A claim is atomic across processes: of sixteen claimers on two clients, exactly one wins,
// and the namespace records it.
func TestClaimRace(t *testing.T) {
	c := newCluster(t)
	other := newBackend(t)
	o := c.orchestrator(t)
	name := uniqueTask("race")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	for round := range 3 {
		if err := c.b.MarkWarm(t.Context(), backend.WarmMarker{Marker: backend.Marker{Project: s.Project(), Task: name, Sample: "pooled", Owner: labels.SelfOwner()},
			Fingerprint: "fp", Shared: true}); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 16 {
			b := c.b
			if i%2 == 1 {
				b = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				m := backend.Marker{Project: s.Project(), Task: name, Sample: fmt.Sprintf("claimer-%d-%d", round, i), Owner: fmt.Sprintf("host:%d:1", 100+i)}
				won, err := b.Claim(t.Context(), m)
				if err != nil {
					t.Errorf("claim %d: %v", i, err)
				}
				if won {
					wins.Add(1)
					winner.Store(m)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d claims won, want exactly 1", round, wins.Load())
		}
		m := winner.Load().(backend.Marker)
		ps, err := c.b.ListProjects(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Name == s.Project() && (p.Pool != labels.PoolClaimed || p.Sample != m.Sample) {
				t.Fatalf("round %d: listed %+v, want claimed by %s", round, p, m.Sample)
			}
		}
		owned, err := c.b.OwnedProjects(t.Context(), name, m.Owner)
		if err != nil || len(owned) != 1 || owned[0] != s.Project() {
			t.Fatalf("round %d: projects of the winner %s: %v, %v", round, m.Owner, owned, err)
		}
		if won, err := other.Take(t.Context(), s.Project()); won || err != nil {
			t.Fatalf("round %d: a take after the claim: %t, %v", round, won, err)
		}
	}
}

// A SampleInit that fails (a service that exits at once) tears down what it made: no
// namespace of the task is left, and the error says why.
func TestFailedSampleInitLeavesNothing(t *testing.T) {
	c := newCluster(t)
	o := c.orchestrator(t)
	name := uniqueTask("fail")
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive + `
  broken:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo giving up; exit 3"]
`)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err == nil || !strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("sample init: %v, want the exit code and the log tail", err)
	}
	if left := c.namespaces(t, name); len(left) != 0 {
		t.Fatalf("namespaces left by the failed SampleInit: %v", left)
	}
}
