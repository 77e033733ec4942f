package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/orchestrator"
)

// Results of the phases, as the children print them.
type throughputResult struct {
	Side     string    `json:"side"`
	Samples  int       `json:"samples"`
	Done     int       `json:"done"`
	Failed   int       `json:"failed"`
	FirstErr string    `json:"first_error,omitempty"`
	WallS    float64   `json:"wall_s"`
	PerMin   float64   `json:"per_min"`
	SampleMS []float64 `json:"sample_ms"`
	// Per completed sample: start until ready, the 5 execs, the 1 MiB write and read, teardown.
	InitMS     []float64 `json:"init_ms"`
	ExecMS     []float64 `json:"exec_ms"`
	FileMS     []float64 `json:"file_ms"`
	TeardownMS []float64 `json:"teardown_ms"`
	// PhaseMS splits InitMS where the side can tell (network, create, start, ready).
	PhaseMS   map[string][]float64 `json:"phase_ms,omitempty"`
	PeakRSSKB int64                `json:"peak_rss_kb,omitempty"`
	TimedOut  bool                 `json:"timed_out,omitempty"`
}

type capacityResult struct {
	Side        string    `json:"side"`
	Target      int       `json:"target"`
	Attempted   int       `json:"attempted"`
	Live        int       `json:"live"`
	FirstErr    string    `json:"first_error,omitempty"`
	FillS       float64   `json:"fill_s"`
	ExecOK      int       `json:"exec_ok"`
	ExecMS      []float64 `json:"exec_ms"`
	TeardownS   float64   `json:"teardown_s"`
	TeardownErr string    `json:"teardown_error,omitempty"`
	PeakRSSKB   int64     `json:"peak_rss_kb,omitempty"`
	RSSKB       int64     `json:"rss_kb,omitempty"`
	Subnets     string    `json:"subnets,omitempty"`
	TimedOut    bool      `json:"timed_out,omitempty"`
}

type latencyResult struct {
	InitCbx     []float64 `json:"init_composebox_ms"`
	InitCLI     []float64 `json:"init_baseline_ms"`
	ExecCbx     []float64 `json:"exec_composebox_ms"`
	ExecDocker  []float64 `json:"exec_docker_ms"`
	ExecCompose []float64 `json:"exec_compose_ms"`
	Failures    int       `json:"failures"`
	FirstErr    string    `json:"first_error,omitempty"`
}

const (
	payloadSize = 1 << 20
	payloadPath = "/tmp/cbxbench.bin"
	execsPerRun = 5
)

func payload() []byte {
	b := make([]byte, payloadSize)
	_, _ = rand.Read(b)
	return b
}

func shortID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// firstLine is an error's first line, for the table; the phase log keeps the whole text.
func firstLine(err error) string {
	s := strings.TrimSpace(err.Error())
	var ce *cliError
	if errors.As(err, &ce) {
		s = ce.Short()
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "  "+format+"\n", args...)
}

// composeFile is the compose file of a project directory.
func composeFile(dir string) (string, error) {
	for _, n := range []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"} {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no compose file in %s", dir)
}

func newOrchestrator(o options) (*orchestrator.Orchestrator, error) {
	return orchestrator.New(orchestrator.WithStateDir(o.StateDir))
}

// steps times the steps of one sample.
type steps struct {
	init, exec, file, teardown time.Duration
	last, phaseAt              time.Time
	// phases split init finer, where a side can tell: network, create, start, ready.
	phases map[string]time.Duration
}

func newSteps() *steps {
	now := time.Now()
	return &steps{last: now, phaseAt: now, phases: map[string]time.Duration{}}
}

// mark ends a step: its time is the time since the previous mark.
func (s *steps) mark(d *time.Duration) {
	now := time.Now()
	*d = now.Sub(s.last)
	s.last, s.phaseAt = now, now
}

// phase ends a phase of init: its time is the time since the previous phase or mark.
func (s *steps) phase(name string) {
	now := time.Now()
	s.phases[name] = now.Sub(s.phaseAt)
	s.phaseAt = now
}

// set records a phase measured elsewhere.
func (s *steps) set(name string, d time.Duration) { s.phases[name] = d }

// every calls report every d until the returned stop is called: a long phase's progress line.
func every(d time.Duration, report func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				report()
			}
		}
	}()
	return func() { close(done) }
}

// pushThrough runs n samples of work with conc in flight and measures the wall time from the
// first start to the last finish. ctx's deadline stops it early: what finished counts.
func pushThrough(ctx context.Context, side string, n, conc int, work func(ctx context.Context, i int, st *steps) error) *throughputResult {
	res := &throughputResult{Side: side, Samples: n}
	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	stopReports := every(15*time.Second, func() {
		mu.Lock()
		defer mu.Unlock()
		progress("throughput %s: %d/%d done, %d failed, %.0fs", side, res.Done, n, res.Failed, time.Since(start).Seconds())
	})
	for range conc {
		wg.Go(func() {
			for i := range jobs {
				t0 := time.Now()
				st := newSteps()
				err := work(ctx, i, st)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					res.Failed++
					if res.FirstErr == "" {
						res.FirstErr = firstLine(err)
						fmt.Fprintf(os.Stderr, "throughput %s: sample %d: %v\n", side, i, err)
					}
				} else {
					res.Done++
					res.SampleMS = append(res.SampleMS, ms(d))
					res.InitMS = append(res.InitMS, ms(st.init))
					res.ExecMS = append(res.ExecMS, ms(st.exec))
					res.FileMS = append(res.FileMS, ms(st.file))
					res.TeardownMS = append(res.TeardownMS, ms(st.teardown))
					for name, d := range st.phases {
						if res.PhaseMS == nil {
							res.PhaseMS = map[string][]float64{}
						}
						res.PhaseMS[name] = append(res.PhaseMS[name], ms(d))
					}
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	stopReports()
	wall := time.Since(start)
	res.WallS = wall.Seconds()
	res.PerMin = float64(res.Done) / wall.Minutes()
	// The budget stopped it only if samples were left undone.
	res.TimedOut = ctx.Err() != nil && res.Done < n
	return res
}

// cbxSample is the per-sample work on the composebox side: 5 execs and a 1 MiB write and read
// in the default sandbox.
func cbxSample(ctx context.Context, s *orchestrator.Sample, data []byte, st *steps) error {
	sb := s.Default()
	for i := range execsPerRun {
		want := fmt.Sprintf("exec-%d", i)
		r, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "echo exec-$0", fmt.Sprint(i)}})
		if err != nil {
			return fmt.Errorf("exec %d in %s: %w", i, s.Project(), err)
		}
		if r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != want {
			return fmt.Errorf("exec %d in %s: exit %d, stdout %q", i, s.Project(), r.ExitCode, r.Stdout)
		}
	}
	st.mark(&st.exec)
	if err := sb.WriteFile(ctx, payloadPath, data); err != nil {
		return err
	}
	got, err := sb.ReadFile(ctx, payloadPath)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read %s in %s: %d bytes differ from the %d written", payloadPath, s.Project(), len(got), len(data))
	}
	st.mark(&st.file)
	return nil
}

// cliSample is the same work through the compose CLI.
func cliSample(ctx context.Context, p *cliProject, local string, data []byte, scratch string, st *steps) error {
	for i := range execsPerRun {
		want := fmt.Sprintf("exec-%d", i)
		out, err := p.Exec(ctx, nil, "default", "sh", "-c", "echo exec-$0", fmt.Sprint(i))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(out)) != want {
			return fmt.Errorf("exec %d in %s: stdout %q", i, p.name, out)
		}
	}
	st.mark(&st.exec)
	if err := p.CopyIn(ctx, "default", local, payloadPath); err != nil {
		return err
	}
	got, err := p.CopyOut(ctx, "default", payloadPath, scratch)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read %s in %s: %d bytes differ from the %d written", payloadPath, p.name, len(got), len(data))
	}
	st.mark(&st.file)
	return nil
}

func throughputCbx(ctx context.Context, o options) (*throughputResult, error) {
	orc, err := newOrchestrator(o)
	if err != nil {
		return nil, err
	}
	defer orc.Close()
	task, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Path: o.Project, Name: taskCbx})
	if err != nil {
		return nil, err
	}
	defer task.Cleanup(context.WithoutCancel(ctx))
	data := payload()
	wctx, cancel := context.WithDeadline(ctx, o.Deadline)
	defer cancel()
	res := pushThrough(wctx, "composebox", o.N, o.Concurrency, func(ctx context.Context, i int, st *steps) error {
		s, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: fmt.Sprintf("tp-%d", i)})
		if err != nil {
			return err
		}
		st.mark(&st.init)
		err = cbxSample(ctx, s, data, st)
		err = errors.Join(err, s.Cleanup(ctx))
		st.mark(&st.teardown)
		return err
	})
	res.PeakRSSKB = procStatusKB("VmHWM")
	return res, ctx.Err()
}

// cliSetup writes the baseline's override file and returns its compose files.
func cliSetup(o options, dir, name string, services []string, images map[string]string) ([]string, error) {
	main, err := composeFile(dir)
	if err != nil {
		return nil, err
	}
	override := filepath.Join(o.Work, name+".override.yaml")
	if err := writeOverride(override, o.Baseline, services, images); err != nil {
		return nil, err
	}
	return []string{main, override}, nil
}

func multiServiceFiles(o options) ([]string, error) {
	return cliSetup(o, o.Project, "multi-service", []string{"default", "web", "db"}, map[string]string{"web": o.WebImage})
}

func throughputCLI(ctx context.Context, o options) (*throughputResult, error) {
	c, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b := newBaseline(o, c)
	files, err := multiServiceFiles(o)
	if err != nil {
		return nil, err
	}
	data := payload()
	local := filepath.Join(o.Work, "payload.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		return nil, err
	}
	run := shortID()
	wctx, cancel := context.WithDeadline(ctx, o.Deadline)
	defer cancel()
	res := pushThrough(wctx, "baseline", o.N, o.Concurrency, func(ctx context.Context, i int, st *steps) error {
		p := b.project(fmt.Sprintf("%s-tp-%s-%d", taskCLI, run, i), files, 3)
		err := p.Up(ctx)
		if err == nil {
			st.mark(&st.init)
			err = cliSample(ctx, p, local, data, filepath.Join(o.Work, p.name+".out"), st)
		}
		err = errors.Join(err, p.Down(ctx))
		st.mark(&st.teardown)
		return err
	})
	return res, ctx.Err()
}

// fill starts samples with conc at once until target are live or one fails (then it lets the
// samples in flight finish), and returns the live ones and the first error.
func fill[T any](ctx context.Context, side string, target, conc int, start func(ctx context.Context, i int) (T, error)) (live []T, attempted int, firstErr error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := false
	t0 := time.Now()
	defer every(15*time.Second, func() {
		mu.Lock()
		defer mu.Unlock()
		progress("capacity %s: %d live, %.0fs", side, len(live), time.Since(t0).Seconds())
	})()
	for range conc {
		wg.Go(func() {
			for {
				mu.Lock()
				if stop || attempted >= target || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				i := attempted
				attempted++
				mu.Unlock()
				x, err := start(ctx, i)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
						fmt.Fprintf(os.Stderr, "capacity %s: sample %d failed with %d live: %v\n", side, i, len(live), err)
					}
					stop = true
				} else {
					live = append(live, x)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return live, attempted, firstErr
}

// execAll runs check on every live sample, conc at once, and returns the latencies of those
// that succeeded.
func execAll[T any](ctx context.Context, live []T, conc int, check func(ctx context.Context, x T) error) []float64 {
	var mu sync.Mutex
	var out []float64
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	for _, x := range live {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			if err := check(ctx, x); err == nil {
				mu.Lock()
				out = append(out, ms(time.Since(t0)))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// subnetsOf describes how a project's networks are numbered: their subnets, and whether the
// creator chose them (explicit IPAM config on the network) or the daemon did.
func subnetsOf(ctx context.Context, c client.APIClient, project string) string {
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.ComposeProjectLabel+"="+project))})
	if err != nil || len(nets) == 0 {
		return "no network"
	}
	var parts []string
	for _, n := range nets {
		ni, err := c.NetworkInspect(ctx, n.ID, network.InspectOptions{})
		if err != nil {
			continue
		}
		for _, cfg := range ni.IPAM.Config {
			parts = append(parts, cfg.Subnet)
		}
	}
	return strings.Join(parts, ", ")
}

func capacityCbx(ctx context.Context, o options) (*capacityResult, error) {
	orc, err := newOrchestrator(o)
	if err != nil {
		return nil, err
	}
	defer orc.Close()
	task, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Path: o.CapacityProject, Name: taskCbxCap})
	if err != nil {
		return nil, err
	}
	res := &capacityResult{Side: "composebox", Target: o.Capacity}
	wctx, cancel := context.WithDeadline(ctx, o.Deadline)
	defer cancel()
	t0 := time.Now()
	live, attempted, ferr := fill(wctx, "composebox", o.Capacity, o.CapacityConcurrency, func(ctx context.Context, i int) (*orchestrator.Sample, error) {
		return task.SampleInit(ctx, orchestrator.SampleSpec{ID: fmt.Sprintf("cap-%d", i)})
	})
	res.FillS = time.Since(t0).Seconds()
	res.Live, res.Attempted, res.TimedOut = len(live), attempted, wctx.Err() != nil && len(live) < o.Capacity
	res.PeakRSSKB, res.RSSKB = procStatusKB("VmHWM"), procStatusKB("VmRSS")
	if ferr != nil {
		res.FirstErr = firstLine(ferr)
	}
	if len(live) > 0 {
		res.Subnets = subnetsOf(ctx, dockerClient(orc), live[0].Project()) + " … " + subnetsOf(ctx, dockerClient(orc), live[len(live)-1].Project())
		progress("capacity composebox: %d live, exec `true` in each", len(live))
		checkCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		res.ExecMS = execAll(checkCtx, live, o.CapacityConcurrency, func(ctx context.Context, s *orchestrator.Sample) error {
			r, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("exit %d", r.ExitCode)
			}
			return err
		})
		res.ExecOK = len(res.ExecMS)
	}
	progress("capacity composebox: tearing down %d samples (Task.Cleanup)", len(live))
	t1 := time.Now()
	if err := task.Cleanup(context.WithoutCancel(ctx)); err != nil {
		res.TeardownErr = firstLine(err)
	}
	res.TeardownS = time.Since(t1).Seconds()
	return res, ctx.Err()
}

func capacityCLI(ctx context.Context, o options) (*capacityResult, error) {
	c, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b := newBaseline(o, c)
	files, err := cliSetup(o, o.CapacityProject, "two-service", []string{"default", "sidecar"}, nil)
	if err != nil {
		return nil, err
	}
	res := &capacityResult{Side: "baseline", Target: o.Capacity}
	run := shortID()
	wctx, cancel := context.WithDeadline(ctx, o.Deadline)
	defer cancel()
	t0 := time.Now()
	live, attempted, ferr := fill(wctx, "baseline", o.Capacity, o.CapacityConcurrency, func(ctx context.Context, i int) (*cliProject, error) {
		p := b.project(fmt.Sprintf("%s-cap-%s-%d", taskCLI, run, i), files, 2)
		if err := p.Up(ctx); err != nil {
			_ = p.Down(ctx) // whatever it created before it failed
			return nil, err
		}
		return p, nil
	})
	res.FillS = time.Since(t0).Seconds()
	res.Live, res.Attempted, res.TimedOut = len(live), attempted, wctx.Err() != nil && len(live) < o.Capacity
	if ferr != nil {
		res.FirstErr = firstLine(ferr)
	}
	if len(live) > 0 {
		res.Subnets = subnetsOf(ctx, c, live[0].name) + " … " + subnetsOf(ctx, c, live[len(live)-1].name)
		progress("capacity baseline: %d live, compose exec `true` in each", len(live))
		checkCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		res.ExecMS = execAll(checkCtx, live, o.CapacityConcurrency, func(ctx context.Context, p *cliProject) error {
			_, err := p.Exec(ctx, nil, "default", "true")
			return err
		})
		res.ExecOK = len(res.ExecMS)
	}
	progress("capacity baseline: tearing down %d samples (down -v -t 1, %d at once)", len(live), o.CapacityConcurrency)
	t1 := time.Now()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, o.CapacityConcurrency)
	for _, p := range live {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := p.Down(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.TeardownS = time.Since(t1).Seconds()
	if err := errors.Join(errs...); err != nil {
		res.TeardownErr = firstLine(err)
	}
	return res, ctx.Err()
}

// latencyBoth measures, one operation at a time and alternating which side goes first in each
// round, SampleInit-to-ready against `up --wait`, then exec of `true` through composebox,
// `docker exec` and `compose exec` against one live sample of each.
func latencyBoth(ctx context.Context, o options) (*latencyResult, error) {
	orc, err := newOrchestrator(o)
	if err != nil {
		return nil, err
	}
	defer orc.Close()
	task, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Path: o.Project, Name: taskCbx})
	if err != nil {
		return nil, err
	}
	defer task.Cleanup(context.WithoutCancel(ctx))
	b := newBaseline(o, dockerClient(orc))
	files, err := multiServiceFiles(o)
	if err != nil {
		return nil, err
	}
	res := &latencyResult{}
	fail := func(err error) {
		res.Failures++
		if res.FirstErr == "" {
			res.FirstErr = firstLine(err)
			fmt.Fprintf(os.Stderr, "latency: %v\n", err)
		}
	}
	wctx, cancel := context.WithDeadline(ctx, o.Deadline)
	defer cancel()
	run := shortID()

	cbxInit := func() {
		t0 := time.Now()
		s, err := task.SampleInit(wctx, orchestrator.SampleSpec{})
		if err != nil {
			fail(err)
			return
		}
		res.InitCbx = append(res.InitCbx, ms(time.Since(t0)))
		if err := s.Cleanup(wctx); err != nil {
			fail(err)
		}
	}
	cliInit := func(i int) {
		p := b.project(fmt.Sprintf("%s-lat-%s-%d", taskCLI, run, i), files, 3)
		t0 := time.Now()
		err := p.Up(wctx)
		d := time.Since(t0)
		if derr := p.Down(wctx); err == nil && derr != nil {
			fail(derr)
		}
		if err != nil {
			fail(err)
			return
		}
		res.InitCLI = append(res.InitCLI, ms(d))
	}
	for i := 0; i < o.InitRounds && wctx.Err() == nil; i++ {
		if i%2 == 0 {
			cbxInit()
			cliInit(i)
		} else {
			cliInit(i)
			cbxInit()
		}
		if (i+1)%5 == 0 {
			progress("latency: %d/%d init rounds", i+1, o.InitRounds)
		}
	}

	s, err := task.SampleInit(wctx, orchestrator.SampleSpec{ID: "lat-exec"})
	if err != nil {
		return res, err
	}
	defer s.Cleanup(wctx)
	p := b.project(fmt.Sprintf("%s-lat-%s-exec", taskCLI, run), files, 3)
	defer p.Down(wctx)
	if err := p.Up(wctx); err != nil {
		return res, err
	}
	ctr := s.Default().ContainerName()
	ops := []func() error{
		func() error {
			t0 := time.Now()
			r, err := s.Default().Exec(wctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("exec true: exit %d", r.ExitCode)
			}
			if err == nil {
				res.ExecCbx = append(res.ExecCbx, ms(time.Since(t0)))
			}
			return err
		},
		func() error {
			t0 := time.Now()
			err := b.DockerExec(wctx, ctr, "true")
			if err == nil {
				res.ExecDocker = append(res.ExecDocker, ms(time.Since(t0)))
			}
			return err
		},
		func() error {
			t0 := time.Now()
			_, err := p.Exec(wctx, nil, "default", "true")
			if err == nil {
				res.ExecCompose = append(res.ExecCompose, ms(time.Since(t0)))
			}
			return err
		},
	}
	for i := 0; i < o.ExecRounds && wctx.Err() == nil; i++ {
		for j := range ops {
			if err := ops[(i+j)%len(ops)](); err != nil {
				fail(err)
			}
		}
	}
	return res, ctx.Err()
}

// dockerClient is the Engine API client of orc's backend, the Docker one New made from the
// environment: the baselines call the engine directly beside it.
func dockerClient(orc *orchestrator.Orchestrator) client.APIClient {
	if d, ok := orc.Backend().(*dockerbackend.Backend); ok {
		return d.Client()
	}
	return nil
}
