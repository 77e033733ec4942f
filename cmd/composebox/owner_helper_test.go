package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backends"
)

// The kill -9 tests need a process that owns a sample and can be killed: this test binary,
// re-run as TestHelperOwner. It starts one sample with the library, prints its project and
// owner, and then, depending on its mode:
//   - own: blocks until its stdin closes (the test kills it long before);
//   - detach: hands the sample over, as `composebox up` does, and exits.
//
// With "+reaper", the orchestrator is made WithReaper.
const (
	helperModeEnv  = "CBX_TEST_OWNER_MODE"
	helperTaskEnv  = "CBX_TEST_OWNER_TASK"
	helperStateEnv = "CBX_TEST_OWNER_STATE"
	// With a kubeconfig (and a registry), the sample runs on that cluster.
	helperKubeconfigEnv = "CBX_TEST_OWNER_KUBECONFIG"
	helperRegistryEnv   = "CBX_TEST_OWNER_REGISTRY"
)

// keepAlive is a one-service project that is up in well under a second.
const keepAlive = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

// twoServices has a network of its own, as most compose projects do.
const twoServices = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

func TestHelperOwner(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		t.Skip("helper process of the kill -9 tests")
	}
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	opts := []orchestrator.Option{orchestrator.WithStateDir(os.Getenv(helperStateEnv))}
	if strings.HasSuffix(mode, "+reaper") {
		opts = append(opts, orchestrator.WithReaper())
	}
	if kc := os.Getenv(helperKubeconfigEnv); kc != "" {
		b, err := backends.Kubernetes(kubernetes.Options{Kubeconfig: kc, Registry: os.Getenv(helperRegistryEnv)})
		if err != nil {
			fail(err)
		}
		opts = append(opts, orchestrator.WithBackend(b))
	}
	o, err := orchestrator.New(opts...)
	if err != nil {
		fail(err)
	}
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: os.Getenv(helperTaskEnv), YAML: []byte(keepAlive)})
	if err != nil {
		fail(err)
	}
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		fail(err)
	}
	if strings.HasPrefix(mode, "detach") {
		if err := s.Detach(ctx); err != nil {
			fail(err)
		}
	}
	fmt.Printf("CBX-PROJECT %s\nCBX-OWNER %s\n", s.Project(), labels.SelfOwner())
	if strings.HasPrefix(mode, "detach") {
		os.Exit(0)
	}
	// Owned: block until the test kills us. Should the test die first, stdin closes: clean up.
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = task.Cleanup(ctx)
	os.Exit(0)
}

// ownerProc is a running TestHelperOwner.
type ownerProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *bytes.Buffer
	project string
	owner   string
}

// startOwner runs TestHelperOwner in mode for task and waits until its sample is up. It is
// killed at the end of the test.
func startOwner(t *testing.T, mode, task string, env ...string) *ownerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOwner$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperModeEnv+"="+mode, helperTaskEnv+"="+task, helperStateEnv+"="+t.TempDir()), env...)
	p := &ownerProc{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(60 * time.Second)
	for p.project == "" || p.owner == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("owner process exited before its sample was up: %v\n%s", cmd.ProcessState, p.stderr)
			}
			if v, ok := strings.CutPrefix(l, "CBX-PROJECT "); ok {
				p.project = v
			}
			if v, ok := strings.CutPrefix(l, "CBX-OWNER "); ok {
				p.owner = v
			}
		case <-timeout:
			t.Fatalf("owner process did not start its sample within 60 s\n%s", p.stderr)
		}
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

// kill sends SIGKILL and reaps the process.
func (p *ownerProc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// wait waits for a process that exits by itself (detach mode).
func (p *ownerProc) wait(t *testing.T) {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("owner process: %v\n%s", err, p.stderr)
	}
}

func uniqueTask(name string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "cbxt-" + name + "-" + hex.EncodeToString(b[:])
}

// removeTaskProjects removes, at the end of the test, every project of task whoever owns it.
func removeTaskProjects(t *testing.T, c client.APIClient, task string) {
	t.Cleanup(func() {
		if _, err := tracking.Sweep(context.Background(), c, backend.Selector{All: true, Task: task}, cleanup.RemoveOptions{}); err != nil {
			t.Errorf("remove projects of %s: %v", task, err)
		}
	})
}

func taskLabel(task string) string       { return labels.LabelTask + "=" + task }
func projectLabel(project string) string { return labels.ComposeProjectLabel + "=" + project }

// poll checks cond until it holds or d passes, and reports whether it held.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// lsJSON runs `ls --all --json` and returns the projects of task by name.
func lsJSON(t *testing.T, task string, extra ...string) map[string]lsEntry {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"ls", "--all", "--json"}, extra...)...)
	if code != 0 {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errOut)
	}
	var list lsResult
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	got := map[string]lsEntry{}
	for _, p := range list.Projects {
		if p.Task == task {
			got[p.Name] = p
		}
	}
	return got
}

// cleanupJSON runs `cleanup --json args...` and returns its result.
func cleanupJSON(t *testing.T, args ...string) cleanupResult {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"cleanup", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("cleanup %v: exit %d\n%s%s", args, code, out, errOut)
	}
	var res cleanupResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("cleanup --json: %v\n%s", err, out)
	}
	return res
}

func removedNames(res cleanupResult) []string {
	var out []string
	for _, p := range res.Projects {
		out = append(out, p.Name)
	}
	return out
}

// reaperRunning reports whether a watchdog for owner is running: a process started with the
// reaper's environment (which /proc keeps as it was at exec).
func reaperRunning(owner string) bool {
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	want := []byte("\x00COMPOSEBOX_REAPER_OWNER=" + owner + "\x00")
	for _, f := range envs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if bytes.Contains(append([]byte{0}, b...), want) {
			return true
		}
	}
	return false
}

// newLib returns an orchestrator for samples owned by the test process itself.
func newLib(t *testing.T, opts ...orchestrator.Option) *orchestrator.Orchestrator {
	t.Helper()
	testutil.BaseImage(t)
	o, err := orchestrator.New(append([]orchestrator.Option{orchestrator.WithStateDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// engineClient is the Engine API client of o's backend, the Docker one New made from the
// environment, through which a test looks at and kills containers beside the library.
func engineClient(t *testing.T, o *orchestrator.Orchestrator) client.APIClient {
	t.Helper()
	d, ok := o.Backend().(*dockerbackend.Backend)
	if !ok {
		t.Fatalf("backend %s: not a Docker engine", o.Backend().Kind())
	}
	return d.Client()
}

// samples starts n samples of yaml under task, at once, owned by this process.
func samples(t *testing.T, o *orchestrator.Orchestrator, task, yaml string, n int) []*orchestrator.Sample {
	t.Helper()
	removeTaskProjects(t, engineClient(t, o), task)
	tk, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: task, YAML: []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*orchestrator.Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = tk.SampleInit(t.Context(), orchestrator.SampleSpec{}) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
