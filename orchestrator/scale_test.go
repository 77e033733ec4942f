package orchestrator_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// twoServices is a two-service project on the base image, on its own network, with nothing to
// wait for beyond the containers running: what a burst measures is the daemon's create and
// start path.
const twoServices = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  peer:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`

func TestBurst30ConcurrentSampleInits(t *testing.T) {
	o, rec := newOrchestrator(t)
	name := "burst-" + compose.NewSampleID()
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(twoServices)})

	const n = 30
	samples := make([]*orchestrator.Sample, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { samples[i], errs[i] = task.SampleInit(t.Context(), orchestrator.SampleSpec{ID: fmt.Sprint(i)}) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range samples {
			if s != nil {
				_ = s.Cleanup(context.Background())
			}
		}
	})

	for i, err := range errs {
		if err != nil {
			t.Errorf("sample %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	projects := map[string]bool{}
	for _, s := range samples {
		projects[s.Project()] = true
		if got := names(s.Sandboxes()); len(got) != 2 || got[0] != "default" {
			t.Errorf("%s: sandboxes %v", s.Project(), got)
		}
	}
	if len(projects) != n || rec.count(orchestrator.EventSampleHealthy) != n {
		t.Errorf("%d distinct projects, %d healthy events; want %d of each", len(projects), rec.count(orchestrator.EventSampleHealthy), n)
	}
	// Every sample is usable, not just started.
	for _, s := range samples {
		wg.Go(func() {
			if res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
				t.Errorf("exec in %s: %v, exit %d", s.Project(), err, res.ExitCode)
			}
		})
	}
	wg.Wait()

	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatalf("task cleanup: %v", err)
	}
	if left := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"="+name); left != 0 {
		t.Errorf("%d containers, networks and volumes of task %s left after cleanup", left, name)
	}
}

func TestRetryResetLifecycleCallsButNotExec(t *testing.T) {
	direct := testutil.Docker(t)
	socket, ok := strings.CutPrefix(direct.DaemonHost(), "unix://")
	if !ok {
		t.Fatalf("the proxy needs a unix socket daemon, have %s", direct.DaemonHost())
	}
	proxy := startResetProxy(t, socket)
	// Each of these reaches the daemon, which does the work, and then the answer is lost: the
	// retry must find the work done rather than do it twice.
	netCreate := proxy.resetFirst(http.MethodPost, `/networks/create$`)
	ctrCreate := proxy.resetFirst(http.MethodPost, `/containers/create$`)
	ctrStart := proxy.resetFirst(http.MethodPost, `/containers/[^/]+/start$`)

	c, err := client.NewClientWithOpts(client.WithHost("unix://"+proxy.path), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// Retries are logged at debug level: shown with -v or on failure.
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o, _ := newOrchestrator(t, orchestrator.WithClient(c), orchestrator.WithLogger(log))
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "retry-" + compose.NewSampleID(), YAML: []byte(twoServices)})
	s, err := task.SampleInit(t.Context(), orchestrator.SampleSpec{})
	if s != nil {
		t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	}
	if err != nil {
		t.Fatalf("sample init through a resetting proxy: %v", err)
	}

	for name, r := range map[string]*resetRule{"network create": netCreate, "container create": ctrCreate, "container start": ctrStart} {
		if hits, resets := proxy.count(r); resets != 1 || hits < 2 {
			t.Errorf("%s: %d requests, %d reset; want the reset one and its retry", name, hits, resets)
		}
	}
	// The retried creates converged on what the lost attempts made: no duplicates.
	ctrs, err := direct.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", projectLabel(s.Project())))})
	if err != nil {
		t.Fatal(err)
	}
	for _, ctr := range ctrs {
		if ctr.State != "running" {
			t.Errorf("container %v is %s", ctr.Names, ctr.State)
		}
	}
	if len(ctrs) != 2 {
		t.Errorf("%d containers in %s, want 2", len(ctrs), s.Project())
	}

	// An exec whose answer is lost is not retried: the caller gets the error.
	execCreate := proxy.resetFirst(http.MethodPost, `/containers/[^/]+/exec$`)
	if res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err == nil {
		t.Errorf("exec through a reset connection succeeded: %+v", res)
	}
	if hits, _ := proxy.count(execCreate); hits != 1 {
		t.Errorf("exec create sent %d times, want once", hits)
	}
	// The connection is what failed, not the sandbox.
	if res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("exec after the reset: %v, exit %d", err, res.ExitCode)
	}

	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := testutil.Resources(t, direct, projectLabel(s.Project())); left != 0 {
		t.Errorf("%d resources left after cleanup", left)
	}
}

// testLog writes to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// resetProxy is an HTTP proxy on a unix socket in front of the daemon's. It passes requests on
// (hijacked exec streams included) and, for the rules armed with resetFirst, lets the first
// matching request reach the daemon and then closes the client's connection without an
// answer: the daemon did the work, and the client saw a connection cut short.
type resetProxy struct {
	path     string
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu     sync.Mutex
	rules  []*resetRule
	conns  map[net.Conn]struct{}
	closed bool
}

type resetRule struct {
	method string
	path   *regexp.Regexp
	left   int // resets still to do
	hits   int // matching requests seen
	resets int
}

func startResetProxy(t *testing.T, upstream string) *resetProxy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{path: path, upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(p.close)
	p.wg.Go(p.accept)
	return p
}

// resetFirst arms a rule: the next request of method whose path matches pattern is reset.
func (p *resetProxy) resetFirst(method, pattern string) *resetRule {
	r := &resetRule{method: method, path: regexp.MustCompile(pattern), left: 1}
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
	return r
}

func (p *resetProxy) count(r *resetRule) (hits, resets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return r.hits, r.resets
}

// match counts req against every rule and reports whether it is to be reset.
func (p *resetProxy) match(req *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	reset := false
	for _, r := range p.rules {
		if req.Method == r.method && r.path.MatchString(req.URL.Path) {
			r.hits++
			if r.left > 0 && !reset {
				r.left--
				r.resets++
				reset = true
			}
		}
	}
	return reset
}

func (p *resetProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers a connection so that close can end it; false once the proxy is closed.
func (p *resetProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *resetProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *resetProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.track(c) {
			p.wg.Go(func() { p.serve(c) })
		}
	}
}

// serve relays one client connection's requests, one at a time, over one daemon connection.
func (p *resetProxy) serve(c net.Conn) {
	defer p.untrack(c)
	up, err := net.Dial("unix", p.upstream)
	if err != nil || !p.track(up) {
		return
	}
	defer p.untrack(up)
	br, ubr := bufio.NewReader(c), bufio.NewReader(up)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		reset := p.match(req)
		if err := req.Write(up); err != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			// A hijacked exec or attach stream: raw bytes both ways from here on, the
			// daemon's 101 answer included, with half-closes passed through.
			var wg sync.WaitGroup
			wg.Go(func() {
				_, _ = io.Copy(up, br)
				_ = up.(*net.UnixConn).CloseWrite()
			})
			_, _ = io.Copy(c, ubr)
			_ = c.(*net.UnixConn).CloseWrite()
			wg.Wait()
			return
		}
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			return
		}
		if reset {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			return
		}
		err = resp.Write(c)
		_ = resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}
