package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
)

// recorder collects an orchestrator's events.
type recorder struct {
	mu     sync.Mutex
	events []orchestrator.Event
}

func (r *recorder) observe(e orchestrator.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// first is when the first event of kind for service came (with message, when not ""), and
// whether one did.
func (r *recorder) first(kind orchestrator.EventKind, service, message string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == kind && e.Service == service && (message == "" || e.Message == message) {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// engine is one backend a parity test runs on: the cluster's (k8s set) or Docker's.
type engine struct {
	name string
	o    *orchestrator.Orchestrator
	rec  *recorder
	k8s  *kubernetes.Backend
}

// onBoth runs fn on the cluster and on Docker, the same compose files and the same assertions,
// to show that a sample behaves the same on either. It is skipped without a cluster.
func onBoth(t *testing.T, fn func(t *testing.T, e engine)) {
	b := newBackend(t)
	for _, name := range []string{"kubernetes", "docker"} {
		t.Run(name, func(t *testing.T) {
			e := engine{name: name, rec: &recorder{}}
			opts := []orchestrator.Option{orchestrator.WithStateDir(t.TempDir()), orchestrator.WithObserver(e.rec.observe)}
			if name == "kubernetes" {
				e.k8s = b
				opts = append(opts, orchestrator.WithBackend(b))
			}
			o, err := orchestrator.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = o.Close() })
			e.o = o
			fn(t, e)
		})
	}
}

// onCluster is an orchestrator on the cluster alone.
func onCluster(t *testing.T) engine {
	b := newBackend(t)
	e := engine{name: "kubernetes", rec: &recorder{}, k8s: b}
	o, err := orchestrator.New(orchestrator.WithBackend(b), orchestrator.WithStateDir(t.TempDir()), orchestrator.WithObserver(e.rec.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	e.o = o
	return e
}

func (e engine) task(t *testing.T, spec orchestrator.TaskSpec) *orchestrator.Task {
	t.Helper()
	task, err := e.o.TaskInit(t.Context(), spec)
	if err != nil {
		t.Fatalf("task init: %v", err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	return task
}

func (e engine) sample(t *testing.T, task *orchestrator.Task) *orchestrator.Sample {
	t.Helper()
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if err != nil {
		t.Fatalf("sample init: %v", err)
	}
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	return s
}

// gone checks that nothing of a project is left on the cluster: no namespace, no volume
// directory on the node.
func (e engine) gone(t *testing.T, project string) {
	t.Helper()
	if e.k8s == nil {
		return
	}
	cs := e.k8s.Clientset()
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), project, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s still there: %v", project, err)
	}
	if root := k8stest.Load(t).Volumes; root != "" {
		if _, err := os.Lstat(filepath.Join(root, project)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("volume directory of %s left: %v", project, err)
		}
	}
}

// sh runs script in sb and returns its stdout, failing the test on a non-zero exit.
func sh(t *testing.T, sb *orchestrator.Sandbox, script string) string {
	t.Helper()
	res, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s in %s: exit %d, %v; stderr %q", script, sb.Service(), res.ExitCode, err, res.StderrText())
	}
	return res.StdoutText()
}

// Each depends_on condition holds on either backend: the dependent's own command, run as it
// starts, sees the one-shot setup's output and the healthy dependency's answer. On the cluster
// the dependent's command is only released once its dependencies met their conditions.
func TestDependsOnConditions(t *testing.T) {
	onBoth(t, func(t *testing.T, e engine) {
		task := e.task(t, orchestrator.TaskSpec{Name: "depends-on", YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "cat /shared/state > /tmp/seen-setup; for try in 1 2 3 4 5; do { sleep 60 & } | nc -w 30 db 5432 > /tmp/seen-db 2>>/tmp/seen-nc && [ -s /tmp/seen-db ] && break; sleep 1; done; echo \"nc exit $$?\" >>/tmp/seen-nc; touch /tmp/seen-done; exec tail -f /dev/null"]
    volumes: ["shared:/shared"]
    depends_on:
      setup: {condition: service_completed_successfully}
      db: {condition: service_healthy}
      cache: {condition: service_started}
  setup:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "sleep 1; echo set-up > /shared/state"]
    volumes: ["shared:/shared"]
  db:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "sleep 1; exec nc -ll -p 5432 -e echo pong"]
    healthcheck:
      test: ["CMD-SHELL", "nc -w 1 127.0.0.1 5432 </dev/null | grep -q pong"]
      interval: 1s
      timeout: 2s
      retries: 30
  cache:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
volumes:
  shared: {}
`)})
		s := e.sample(t, task)
		// The sample is handed over once default runs, which may be before its command got
		// db's answer: the exec waits for the command to say it is done. The command tries
		// again when it got nothing: on a loaded cluster a container's first DNS lookups were
		// seen to fail ("bad address 'db'") just after its start gate had resolved the same
		// name, while the name's endpoints stood unchanged (docs/kubernetes.md, limits). Two things make the
		// answer come under load: nc's stdin stays open until it comes (busybox's nc quits
		// at its stdin's end; the sleep holds it open without holding the command back), and
		// nc keeps trying to connect for long enough (db's `nc -ll` accepts two connections
		// at a time, and with healthchecks connecting too, a refused SYN waits a second and
		// more to be sent again).
		res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Timeout: 90 * time.Second,
			Cmd: []string{"sh", "-c", "until [ -e /tmp/seen-done ]; do sleep 0.1; done; cat /tmp/seen-setup /tmp/seen-db"}})
		if err != nil || res.StdoutText() != "set-up\npong\n" {
			nc, _ := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"cat", "/tmp/seen-nc"}})
			t.Errorf("default saw %q as it started (%v), want setup's state and db's answer; nc said %q", res.StdoutText(), err, nc.StdoutText())
		}
		if _, err := s.Sandbox("setup"); err == nil {
			t.Error("the finished one-shot setup has a sandbox")
		}
		if e.k8s != nil {
			started, ok := e.rec.first(orchestrator.EventServiceProgress, "default", "starting")
			for _, dep := range []string{"setup", "db"} {
				ready, rok := e.rec.first(orchestrator.EventServiceReady, dep, "")
				if !ok || !rok || started.Before(ready) {
					t.Errorf("default's command released at %s, %s ready at %s (events %v %v)", started, dep, ready, ok, rok)
				}
			}
		}
		if err := s.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.gone(t, s.Project())
	})
}

// composebox looks into a starting container itself (an exec of `true`) to see it running
// before the kubelet reports it. An image without `true` (here one program, busybox as
// `sleep`, in an image from scratch) is left to the kubelet's report: its sample still comes
// up, and its dependent starts after it.
func TestServiceWithoutTrueComesUp(t *testing.T) {
	e := onCluster(t)
	dir := t.TempDir()
	dockerfile := "ARG BASE\nFROM ${BASE} AS base\nFROM scratch\nCOPY --from=base /bin/busybox /bin/sleep\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	task := e.task(t, orchestrator.TaskSpec{Name: "without-true", WorkingDir: dir, YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on: [bare]
  bare:
    build:
      context: .
      args: {BASE: "${COMPOSEBOX_BASE_IMAGE}"}
    command: ["/bin/sleep", "600"]
`)})
	s := e.sample(t, task)
	if res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec in default: exit %d, %v", res.ExitCode, err)
	}
	started, ok := e.rec.first(orchestrator.EventServiceProgress, "default", "starting")
	ready, rok := e.rec.first(orchestrator.EventServiceReady, "bare", "")
	if !ok || !rok || started.Before(ready) {
		t.Errorf("default's command released at %s, bare ready at %s (events %v %v)", started, ready, ok, rok)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.gone(t, s.Project())
}

// A dependency that fails stops the sample with the same typed error on either backend,
// naming it: a one-shot that exits non-zero, and a healthcheck that never passes. The
// dependent never starts, and nothing is left.
func TestFailedDependencyStopsTheSample(t *testing.T) {
	onBoth(t, func(t *testing.T, e engine) {
		for _, c := range []struct {
			name, yaml, reason, service, output string
		}{
			{"exits non-zero", `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      setup: {condition: service_completed_successfully}
  setup:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo setup-went-wrong; exit 3"]
`, "exited", "setup", "setup-went-wrong"},
			{"never healthy", `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    depends_on:
      db: {condition: service_healthy}
  db:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    healthcheck:
      test: ["CMD-SHELL", "echo probe-said-no; exit 1"]
      interval: 1s
      timeout: 2s
      retries: 2
`, "unhealthy", "db", "probe-said-no"},
		} {
			t.Run(c.name, func(t *testing.T) {
				task := e.task(t, orchestrator.TaskSpec{Name: "failed-dependency", YAML: []byte(c.yaml)})
				start := time.Now()
				_, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
				var nr *lifecycle.NotReadyError
				if !errors.As(err, &nr) || nr.Reason != c.reason || !errors.Is(err, errdefs.ErrUnavailable) || errors.Is(err, errdefs.ErrTimeout) {
					t.Fatalf("err = %v, want a NotReadyError, %s", err, c.reason)
				}
				if len(nr.Services) != 1 || nr.Services[0].Service != c.service {
					t.Fatalf("services %+v, want %s alone", nr.Services, c.service)
				}
				if !strings.Contains(err.Error(), c.output) || !strings.Contains(err.Error(), "service "+c.service) {
					t.Errorf("error lacks the dependency's output or name: %v", err)
				}
				if c.reason == "exited" && nr.Services[0].ExitCode != 3 {
					t.Errorf("exit code %d", nr.Services[0].ExitCode)
				}
				if nr.Waited > nr.Budget {
					t.Errorf("failed after %s, past its budget %s", nr.Waited, nr.Budget)
				}
				t.Logf("%s failed after %s", c.name, time.Since(start).Round(time.Millisecond))
				if e.k8s != nil {
					if _, ok := e.rec.first(orchestrator.EventServiceProgress, "default", "starting"); ok {
						t.Error("default's command was released although its dependency failed")
					}
					e.gone(t, nr.Project)
				}
			})
		}
	})
}

// A named volume is shared by two services, tmpfs is in memory, and binds from the task
// directory arrive with their content and modes, read-only where :ro, before the service's
// command runs (it exits 7 without them): the same on either backend.
func TestVolumesAndBinds(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"files/a.txt": "alpha\n", "files/sub/b.txt": "beta\n", "flag.txt": "flag{k8s}\n"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "files/sub/b.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "test -f /files/sub/b.txt && test -f /flag.txt || exit 7; exec tail -f /dev/null"]
    volumes:
      - ./files:/files:ro
      - ./flag.txt:/flag.txt
      - shared:/shared
      - type: tmpfs
        target: /scratch
        tmpfs: {size: 1048576}
  other:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes:
      - shared:/shared
volumes:
  shared: {}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	onBoth(t, func(t *testing.T, e engine) {
		task := e.task(t, orchestrator.TaskSpec{Path: dir})
		s := e.sample(t, task)
		def, other := s.Default(), mustSandbox(t, s, "other")
		if got := sh(t, def, "cat /files/a.txt /files/sub/b.txt /flag.txt; stat -c %a /files/sub/b.txt"); got != "alpha\nbeta\nflag{k8s}\n640\n" {
			t.Errorf("binds: %q", got)
		}
		res, err := def.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "touch /files/new"}})
		if err != nil || res.ExitCode == 0 || !strings.Contains(res.StderrText(), "Read-only file system") {
			t.Errorf("write into a :ro bind: exit %d, %q, %v", res.ExitCode, res.StderrText(), err)
		}
		sh(t, def, "echo more >> /flag.txt && echo from-default > /shared/note")
		if got := sh(t, other, "cat /shared/note"); got != "from-default\n" {
			t.Errorf("other reads %q from the shared volume", got)
		}
		if got := sh(t, def, "grep ' /scratch ' /proc/mounts"); !strings.HasPrefix(got, "tmpfs /scratch tmpfs") {
			t.Errorf("/scratch is not a tmpfs: %q", got)
		}
		if err := s.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.gone(t, s.Project())
		if e.k8s != nil {
			// Nothing of the volume under /tmp, ever (make k8s's cluster has no default
			// StorageClass: the shared volume was a directory under the volume root, which
			// gone checked).
			if m, _ := filepath.Glob("/tmp/composebox-volumes-" + s.Project() + "*"); len(m) != 0 {
				t.Errorf("volume directories left: %v", m)
			}
		}
	})
}

// A host path the task directory does not hold fails with a typed error saying it does not
// map, before anything is created.
func TestBindOutsideTheTaskDirectoryDoesNotMap(t *testing.T) {
	e := onCluster(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := orchestrator.WithPolicy(relaxedMounts(outside))
	o, err := orchestrator.New(orchestrator.WithBackend(e.k8s), orchestrator.WithStateDir(t.TempDir()), policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: "bind-outside", YAML: []byte(fmt.Sprintf(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["%s:/data:ro"]
`, outside))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	_, err = task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if !errors.Is(err, kubernetes.ErrNotSupported) || !errors.Is(err, errdefs.ErrPrerequisite) || !strings.Contains(err.Error(), "outside the task directory") {
		t.Fatalf("bind of %s: %v, want a typed error saying it does not map", outside, err)
	}
}

// Limits and reservations become the pod's resources, and the container's cgroup enforces
// the limits.
func TestResources(t *testing.T) {
	e := onCluster(t)
	task := e.task(t, orchestrator.TaskSpec{Name: "resources", YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    cpus: 0.5
    mem_limit: 64m
    mem_reservation: 32m
`)})
	s := e.sample(t, task)
	pod, err := e.k8s.Clientset().CoreV1().Pods(s.Project()).Get(t.Context(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := pod.Spec.Containers[0].Resources
	if r.Limits.Cpu().String() != "500m" || r.Limits.Memory().String() != "64Mi" || r.Requests.Memory().String() != "32Mi" || r.Requests.Cpu().String() != "0" {
		t.Errorf("resources %+v", r)
	}
	got := sh(t, s.Default(), "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max")
	if got != "67108864\n50000\n" && got != "67108864\n50000 100000\n" {
		t.Errorf("cgroup limits %q, want 64 MiB and half a CPU", got)
	}
}

func mustSandbox(t *testing.T, s *orchestrator.Sample, service string) *orchestrator.Sandbox {
	t.Helper()
	sb, err := s.Sandbox(service)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// relaxedMounts is the default policy with binds allowed from dir as well.
func relaxedMounts(dir string) compose.Policy {
	p := compose.DefaultPolicy()
	p.AllowedMountRoots = []string{dir}
	return p
}
