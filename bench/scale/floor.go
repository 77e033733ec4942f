package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	mathrand "math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/bench/internal/stats"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator"
)

// The floor: a bare Engine API client (github.com/docker/docker/client, no composebox code on
// its path) doing one sample's whole work, against composebox doing the same work through the
// library on an equivalent compose project (bench/projects/floor). It says what composebox's
// boundary costs: everything above the engine's own work.
//
// One sample, on both sides: a network, the three services' containers (with healthchecks),
// readiness by running each healthcheck's test through exec until it passes, 5 execs of
// `sh -c 'echo exec-N'` (output checked), 1 MiB written and read back at payloadPath (bytes
// compared), and removal. The sides run their batches one after the other, alternating which
// goes first, so that both see the same load on a shared machine.

const taskFloor = "cbxbench-floor" // both sides of the floor phase

// floorService is one service of bench/projects/floor as the bare client creates it; the
// compose file says the same (TestFloorProjectMatches).
type floorService struct {
	name  string
	cmd   []string
	probe []string // the healthcheck's test, as Docker's HealthConfig holds it
}

var floorServices = []floorService{
	{"default", []string{"tail", "-f", "/dev/null"}, []string{"CMD", "test", "-d", "/tmp"}},
	{"web", []string{"httpd", "-f", "-p", "80", "-h", "/etc"}, []string{"CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1/passwd"}},
	{"db", []string{"nc", "-ll", "-p", "5432", "-e", "echo", "pong"}, []string{"CMD-SHELL", "nc -w 1 127.0.0.1 5432 </dev/null | grep -q pong"}},
}

// The healthchecks' timing, as bench/projects/floor gives it, and the longest wait between two
// probes (composebox's: the interval, at most 2 s).
const (
	floorHealthInterval = 30 * time.Second
	floorHealthTimeout  = 5 * time.Second
	floorHealthRetries  = 3
	floorProbeMax       = 2 * time.Second
)

// floorPhases are the steps of one sample that the report compares, in order.
var floorPhases = []string{"network", "create", "start", "ready", "exec", "files", "remove"}

// floorResult is what the floor phase measured.
type floorResult struct {
	// Rounds are the batches, in the order they ran: each round is one batch per side.
	Rounds []floorRound `json:"rounds"`
	// ExecCbx and ExecBare are the latencies of `true` through Sandbox.Exec and through the
	// bare client's create/attach/inspect, on the same container, alternating.
	ExecCbx  []float64 `json:"exec_composebox_ms"`
	ExecBare []float64 `json:"exec_bare_ms"`
	ExecErr  string    `json:"exec_error,omitempty"`
	Load     []string  `json:"load,omitempty"`
	Profiles string    `json:"profiles,omitempty"`
}

type floorRound struct {
	First string            `json:"first"`
	Bare  *throughputResult `json:"bare"`
	Cbx   *throughputResult `json:"composebox"`
}

// bareClient does the floor's samples over a plain Engine API client: no retries, no compose,
// nothing composebox adds.
type bareClient struct {
	c      client.APIClient
	image  string
	memory int64
	owner  string
	run    string

	// Each network gets a /27 of floorPool, in turn, as composebox's managed subnets do: the
	// daemon's default pools hold about 31 networks, which other work on a shared machine (a
	// test that fills them on purpose) may have taken.
	mu   sync.Mutex
	next int
}

// floorPool is where the bare client's networks are numbered, away from composebox's own pool
// (10.213.0.0/16) and the ranges its tests use.
var floorPool = netip.MustParsePrefix("10.219.0.0/16")

// subnet is the next /27 of floorPool.
func (b *bareClient) subnet() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.next % (1 << (27 - floorPool.Bits()))
	b.next++
	a := floorPool.Addr().As4()
	off := n << (32 - 27)
	a[2] += byte(off >> 8)
	a[3] += byte(off)
	return netip.PrefixFrom(netip.AddrFrom4(a), 27).String()
}

// createNetwork creates the sample's network on the next free /27: a subnet another network
// holds (a run interrupted before its sweep) is skipped, as composebox skips one.
func (b *bareClient) createNetwork(ctx context.Context, name string, lbl map[string]string) (string, error) {
	var err error
	for range 16 {
		var created network.CreateResponse
		created, err = b.c.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: lbl,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: b.subnet()}}}})
		if err == nil {
			return created.ID, nil
		}
		if !strings.Contains(err.Error(), "overlaps") {
			break
		}
	}
	return "", fmt.Errorf("create network %s: %w", name, err)
}

// bareContainer is one created container of a floor sample.
type bareContainer struct {
	id  string
	svc floorService
}

// sample runs one floor sample and times its steps into st.
func (b *bareClient) sample(ctx context.Context, i int, data []byte, st *steps) (err error) {
	name := fmt.Sprintf("%s-%s-%d", taskFloor, b.run, i)
	lbl := map[string]string{
		labels.LabelManaged:        "true",
		labels.LabelTask:           taskFloor,
		labels.LabelSample:         fmt.Sprint(i),
		labels.LabelOwner:          b.owner,
		labels.LabelBench:          "floor",
		labels.ComposeProjectLabel: name,
	}
	var netID string
	var ctrs []bareContainer
	defer func() {
		err = errors.Join(err, b.remove(context.WithoutCancel(ctx), ctrs, netID))
		st.mark(&st.teardown)
	}()

	netName := name + "_default"
	if netID, err = b.createNetwork(ctx, netName, lbl); err != nil {
		return err
	}
	st.phase("network")

	ctrs = make([]bareContainer, len(floorServices))
	if err := each(len(floorServices), func(k int) error {
		svc := floorServices[k]
		l := maps.Clone(lbl)
		l[labels.ComposeServiceLabel] = svc.name
		stop := 1
		pids := int64(orchestrator.DefaultContainerPids)
		r, err := b.c.ContainerCreate(ctx,
			&container.Config{
				Image: b.image, Cmd: svc.cmd, Labels: l, StopTimeout: &stop,
				Healthcheck: &container.HealthConfig{Test: svc.probe, Interval: floorHealthInterval, Timeout: floorHealthTimeout, Retries: floorHealthRetries},
			},
			&container.HostConfig{
				Init:        new(true),
				NetworkMode: container.NetworkMode(netName),
				Resources:   container.Resources{Memory: b.memory, PidsLimit: &pids},
			},
			&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netName: {Aliases: []string{svc.name}}}},
			nil, fmt.Sprintf("%s-%s-1", name, svc.name))
		if err != nil {
			return fmt.Errorf("create %s of %s: %w", svc.name, name, err)
		}
		ctrs[k] = bareContainer{id: r.ID, svc: svc}
		return nil
	}); err != nil {
		return err
	}
	st.phase("create")

	if err := each(len(ctrs), func(k int) error {
		if err := b.c.ContainerStart(ctx, ctrs[k].id, container.StartOptions{}); err != nil {
			return fmt.Errorf("start %s of %s: %w", ctrs[k].svc.name, name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	st.phase("start")

	if err := each(len(ctrs), func(k int) error { return b.await(ctx, ctrs[k]) }); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	st.phase("ready")
	st.mark(&st.init)

	def := ctrs[0].id
	for k := range execsPerRun {
		want := fmt.Sprintf("exec-%d", k)
		code, out, err := bareExec(ctx, b.c, def, []string{"sh", "-c", "echo exec-$0", fmt.Sprint(k)})
		if err != nil {
			return fmt.Errorf("exec %d in %s: %w", k, name, err)
		}
		if code != 0 || strings.TrimSpace(string(out)) != want {
			return fmt.Errorf("exec %d in %s: exit %d, stdout %q", k, name, code, out)
		}
	}
	st.mark(&st.exec)

	if err := bareWrite(ctx, b.c, def, payloadPath, data); err != nil {
		return fmt.Errorf("write %s in %s: %w", payloadPath, name, err)
	}
	got, err := bareRead(ctx, b.c, def, payloadPath)
	if err != nil {
		return fmt.Errorf("read %s in %s: %w", payloadPath, name, err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("read %s in %s: %d bytes differ from the %d written", payloadPath, name, len(got), len(data))
	}
	st.mark(&st.file)
	return nil
}

// await runs the container's healthcheck test through exec until it passes: at once, then
// backing off from 50 ms to floorProbeMax, within the budget the healthcheck allows.
func (b *bareClient) await(ctx context.Context, c bareContainer) error {
	argv := c.svc.probe[1:]
	if c.svc.probe[0] == "CMD-SHELL" {
		argv = []string{"/bin/sh", "-c", strings.Join(argv, " ")}
	}
	ctx, cancel := context.WithTimeout(ctx, floorHealthRetries*(floorHealthInterval+floorHealthTimeout))
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		// The healthcheck's timeout bounds the command, as Docker's does; the engine's calls
		// around it are bounded by the budget alone.
		code, _, err := bareExecTimeout(ctx, b.c, c.id, argv, floorHealthTimeout)
		if err == nil && code == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last probe: exit %d, %v)", c.svc.name, ctx.Err(), code, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, floorProbeMax)
	}
}

// remove force-removes the containers, in parallel, then the network.
func (b *bareClient) remove(ctx context.Context, ctrs []bareContainer, netID string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := each(len(ctrs), func(k int) error {
		if ctrs[k].id == "" {
			return nil
		}
		if err := b.c.ContainerRemove(ctx, ctrs[k].id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !client.IsErrNotFound(err) {
			return err
		}
		return nil
	})
	if netID != "" {
		if nerr := b.c.NetworkRemove(ctx, netID); nerr != nil && !client.IsErrNotFound(nerr) {
			err = errors.Join(err, nerr)
		}
	}
	return err
}

// each runs f(0..n-1) in parallel and joins their errors.
func each(n int, f func(k int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() { errs[k] = f(k) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bareExec is an exec as the Engine API has it: create, attach (which starts it), read the
// output to its end, inspect for the exit code.
func bareExec(ctx context.Context, c client.APIClient, ctr string, cmd []string) (int, []byte, error) {
	return bareExecTimeout(ctx, c, ctr, cmd, 0)
}

// bareExecTimeout is bareExec giving up on the command once it has run for timeout (when not
// zero), as a failure; the command is left to end by itself.
func bareExecTimeout(ctx context.Context, c client.APIClient, ctr string, cmd []string, timeout time.Duration) (int, []byte, error) {
	created, err := c.ContainerExecCreate(ctx, ctr, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, nil, err
	}
	hr, err := c.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, nil, err
	}
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { _, err := stdcopy.StdCopy(&stdout, &stderr, hr.Reader); done <- err }()
	var expired <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		expired = tm.C
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = fmt.Errorf("timed out after %s", timeout)
	}
	hr.Close()
	if err != nil {
		return 0, nil, err
	}
	ins, err := c.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return 0, nil, err
	}
	return ins.ExitCode, stdout.Bytes(), nil
}

// bareWrite puts data at path as `docker cp` does: a one-file tar archive, extracted by the
// engine into the file's directory.
func bareWrite(ctx context.Context, c client.APIClient, ctr, path string, data []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: filepath.Base(path), Mode: 0o644, Size: int64(len(data)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return c.CopyToContainer(ctx, ctr, filepath.Dir(path), &buf, container.CopyToContainerOptions{})
}

// bareRead reads the file at path as `docker cp` does: the engine's tar archive of it.
func bareRead(ctx context.Context, c client.APIClient, ctr, path string) ([]byte, error) {
	rc, _, err := c.CopyFromContainer(ctx, ctr, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return nil, err
	}
	return io.ReadAll(tr)
}

// floorBoth runs the floor phase: o.FloorRounds rounds of one batch per side, alternating which
// side goes first, then the exec latency of both on one container.
func floorBoth(ctx context.Context, o options) (*floorResult, error) {
	res := &floorResult{}
	// Step times of composebox's samples come from its events.
	ev := newEventTimes()
	orc, err := orchestrator.New(orchestrator.WithStateDir(o.StateDir), orchestrator.WithObserver(ev.observe))
	if err != nil {
		return nil, err
	}
	defer orc.Close()
	task, err := orc.TaskInit(ctx, orchestrator.TaskSpec{Path: o.FloorProject, Name: taskFloor})
	if err != nil {
		return nil, err
	}
	defer task.Cleanup(context.WithoutCancel(ctx))
	c, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	bare := &bareClient{c: c, image: o.BaseImage, memory: orc.Limits().ContainerMemory, owner: labels.SelfOwner(), run: shortID(), next: mathrand.IntN(2048)}
	if bare.memory == 0 {
		// composebox's default: a quarter of the engine host's memory.
		bare.memory = info.MemTotal / 4
	}
	data := payload()
	prof := newProfiler(o.Profile)
	wctx, cancel := context.WithDeadline(ctx, o.Deadline)
	defer cancel()

	runBare := func(round int) *throughputResult {
		defer prof.start(fmt.Sprintf("bare-%d", round))()
		return pushThrough(wctx, "bare", o.FloorN, o.FloorConcurrency, func(ctx context.Context, i int, st *steps) error {
			return bare.sample(ctx, round*o.FloorN+i, data, st)
		})
	}
	runCbx := func(round int) *throughputResult {
		defer prof.start(fmt.Sprintf("composebox-%d", round))()
		return pushThrough(wctx, "composebox", o.FloorN, o.FloorConcurrency, func(ctx context.Context, i int, st *steps) error {
			id := fmt.Sprintf("fl-%d-%d", round, i)
			s, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: id})
			if err != nil {
				return err
			}
			st.mark(&st.init)
			ev.split(id, st)
			err = cbxSample(ctx, s, data, st)
			err = errors.Join(err, s.Cleanup(ctx))
			st.mark(&st.teardown)
			return err
		})
	}
	var last time.Duration
	for r := 0; r < o.FloorRounds && wctx.Err() == nil; r++ {
		if last > 0 && time.Until(o.Deadline) < last+last/4 {
			progress("floor: %d rounds fit in the time budget", r)
			break
		}
		t0 := time.Now()
		round := floorRound{First: "bare"}
		res.Load = append(res.Load, loadAverage())
		if r%2 == 0 {
			round.Bare = runBare(r)
			round.Cbx = runCbx(r)
		} else {
			round.First = "composebox"
			round.Cbx = runCbx(r)
			round.Bare = runBare(r)
		}
		last = time.Since(t0)
		res.Rounds = append(res.Rounds, round)
		progress("floor round %d: bare %.1f/min, composebox %.1f/min (%.2f×)", r+1, round.Bare.PerMin, round.Cbx.PerMin, round.Cbx.PerMin/round.Bare.PerMin)
	}
	if err := floorExec(wctx, o, task, c, prof, res); err != nil {
		res.ExecErr = firstLine(err)
	}
	res.Profiles = prof.finish()
	return res, ctx.Err()
}

// floorExec measures exec of `true` through Sandbox.Exec and through the bare client, on the
// same container, one at a time, alternating which goes first.
func floorExec(ctx context.Context, o options, task *orchestrator.Task, c client.APIClient, prof *profiler, res *floorResult) error {
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{ID: "fl-exec"})
	if err != nil {
		return err
	}
	defer s.Cleanup(ctx)
	sb := s.Default()
	cbx := func() (time.Duration, error) {
		t0 := time.Now()
		r, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		if err == nil && r.ExitCode != 0 {
			err = fmt.Errorf("exec true: exit %d", r.ExitCode)
		}
		return time.Since(t0), err
	}
	bare := func() (time.Duration, error) {
		t0 := time.Now()
		code, _, err := bareExec(ctx, c, sb.ContainerID(), []string{"true"})
		if err == nil && code != 0 {
			err = fmt.Errorf("bare exec true: exit %d", code)
		}
		return time.Since(t0), err
	}
	for range 3 { // warm-up
		if _, err := cbx(); err != nil {
			return err
		}
		if _, err := bare(); err != nil {
			return err
		}
	}
	defer prof.start("exec")()
	for i := 0; i < o.FloorExecRounds && ctx.Err() == nil; i++ {
		ops := []struct {
			f   func() (time.Duration, error)
			out *[]float64
		}{{cbx, &res.ExecCbx}, {bare, &res.ExecBare}}
		if i%2 == 1 {
			ops[0], ops[1] = ops[1], ops[0]
		}
		for _, op := range ops {
			d, err := op.f()
			if err != nil {
				return err
			}
			*op.out = append(*op.out, ms(d))
		}
	}
	return nil
}

// eventTimes keeps the times of composebox's sample events, by sample id, so that a sample's
// start can be split into the floor's steps.
type eventTimes struct {
	mu     sync.Mutex
	events map[string][]orchestrator.Event
}

func newEventTimes() *eventTimes { return &eventTimes{events: map[string][]orchestrator.Event{}} }

func (e *eventTimes) observe(ev orchestrator.Event) {
	if ev.Sample == "" {
		return
	}
	switch ev.Kind {
	case orchestrator.EventServiceProgress, orchestrator.EventSampleStarted, orchestrator.EventSampleHealthy:
	default:
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	e.mu.Lock()
	e.events[ev.Sample] = append(e.events[ev.Sample], ev)
	e.mu.Unlock()
}

// split divides SampleInit's time (st.init, which ended at st.last) into the floor's steps:
// network (from the call to the first container create, which includes the wait for a start
// slot), create (to the last container created), start (to the containers started, which
// includes the host firewall's rule), ready (to the sample healthy).
func (e *eventTimes) split(id string, st *steps) {
	e.mu.Lock()
	evs := e.events[id]
	delete(e.events, id)
	e.mu.Unlock()
	begin := st.last.Add(-st.init)
	var firstCreating, lastCreated, started, healthy time.Time
	for _, ev := range evs {
		switch {
		case ev.Kind == orchestrator.EventServiceProgress && ev.Message == "creating" && firstCreating.IsZero():
			firstCreating = ev.Time
		case ev.Kind == orchestrator.EventServiceProgress && ev.Message == "created":
			lastCreated = ev.Time
		case ev.Kind == orchestrator.EventSampleStarted:
			started = ev.Time
		case ev.Kind == orchestrator.EventSampleHealthy:
			healthy = ev.Time
		}
	}
	if firstCreating.IsZero() || lastCreated.IsZero() || started.IsZero() || healthy.IsZero() {
		return
	}
	st.set("network", firstCreating.Sub(begin))
	st.set("create", lastCreated.Sub(firstCreating))
	st.set("start", started.Sub(lastCreated))
	st.set("ready", healthy.Sub(started))
}

// profiler writes a CPU profile of each batch and, at the end, the block and mutex profiles
// of composebox's batches, into a directory; a nil profiler does nothing.
type profiler struct {
	dir   string
	files []string
}

func newProfiler(dir string) *profiler {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		progress("profiles: %v", err)
		return nil
	}
	return &profiler{dir: dir}
}

// start begins the CPU profile of one batch, and for composebox's the block and mutex
// profiling; the returned func ends them.
func (p *profiler) start(name string) func() {
	if p == nil {
		return func() {}
	}
	if strings.HasPrefix(name, "composebox") {
		runtime.SetBlockProfileRate(int(100 * time.Microsecond))
		runtime.SetMutexProfileFraction(10)
	}
	stopBlock := func() { runtime.SetBlockProfileRate(0); runtime.SetMutexProfileFraction(0) }
	path := filepath.Join(p.dir, name+".cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		return stopBlock
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return stopBlock
	}
	p.files = append(p.files, path)
	return func() { pprof.StopCPUProfile(); f.Close(); stopBlock() }
}

// finish writes the block and mutex profiles and names the directory.
func (p *profiler) finish() string {
	if p == nil {
		return ""
	}
	for _, name := range []string{"block", "mutex"} {
		if f, err := os.Create(filepath.Join(p.dir, name+".pprof")); err == nil {
			_ = pprof.Lookup(name).WriteTo(f, 0)
			f.Close()
		}
	}
	return p.dir
}

// floorSection names the Markdown section the floor phase writes into the results file (between
// its markers), under floorHeading, which a full run's rewrite keeps.
const (
	floorSection = "bench-floor"
	floorHeading = "## Bare Engine API floor"
)

// floorSummary is what the report says of the floor phase's rounds.
type floorSummary struct {
	rounds             int
	bareMed, cbxMed    float64
	ratios             []float64 // composebox / bare, per round
	ratioMed           float64
	ratioMin, ratioMax float64
	done, failed       [2]int // bare, composebox
	firstErr           [2]string
	execP50, execP95   [2]float64   // bare, composebox
	steps              [][2]float64 // bare, composebox
	stepNames          []string
	timedOut           bool
}

func summarizeFloor(f *floorResult) floorSummary {
	var s floorSummary
	var bare, cbx []float64
	pooled := [2]*throughputResult{{PhaseMS: map[string][]float64{}}, {PhaseMS: map[string][]float64{}}}
	for _, r := range f.Rounds {
		if r.Bare == nil || r.Cbx == nil {
			continue
		}
		for k, t := range []*throughputResult{r.Bare, r.Cbx} {
			s.done[k] += t.Done
			s.failed[k] += t.Failed
			if s.firstErr[k] == "" {
				s.firstErr[k] = t.FirstErr
			}
			p := pooled[k]
			p.InitMS = append(p.InitMS, t.InitMS...)
			p.ExecMS = append(p.ExecMS, t.ExecMS...)
			p.FileMS = append(p.FileMS, t.FileMS...)
			p.TeardownMS = append(p.TeardownMS, t.TeardownMS...)
			p.SampleMS = append(p.SampleMS, t.SampleMS...)
			for name, xs := range t.PhaseMS {
				p.PhaseMS[name] = append(p.PhaseMS[name], xs...)
			}
		}
		if r.Bare.TimedOut || r.Cbx.TimedOut || r.Bare.PerMin == 0 {
			s.timedOut = true
			continue // a batch cut short by the budget is no figure
		}
		s.rounds++
		bare = append(bare, r.Bare.PerMin)
		cbx = append(cbx, r.Cbx.PerMin)
		s.ratios = append(s.ratios, r.Cbx.PerMin/r.Bare.PerMin)
	}
	s.bareMed, s.cbxMed = median(bare), median(cbx)
	if len(s.ratios) > 0 {
		s.ratioMed = median(s.ratios)
		s.ratioMin, s.ratioMax = slices.Min(s.ratios), slices.Max(s.ratios)
	}
	s.execP50 = [2]float64{stats.Percentile(f.ExecBare, 50), stats.Percentile(f.ExecCbx, 50)}
	s.execP95 = [2]float64{stats.Percentile(f.ExecBare, 95), stats.Percentile(f.ExecCbx, 95)}
	for _, st := range []struct {
		name string
		get  func(t *throughputResult) []float64
	}{
		{"network (composebox: with the wait for a start slot)", func(t *throughputResult) []float64 { return t.PhaseMS["network"] }},
		{"create 3 containers", func(t *throughputResult) []float64 { return t.PhaseMS["create"] }},
		{"start (composebox: with the host firewall's rule)", func(t *throughputResult) []float64 { return t.PhaseMS["start"] }},
		{"ready", func(t *throughputResult) []float64 { return t.PhaseMS["ready"] }},
		{"start to ready, in all", func(t *throughputResult) []float64 { return t.InitMS }},
		{"5 execs", func(t *throughputResult) []float64 { return t.ExecMS }},
		{"1 MiB write + read", func(t *throughputResult) []float64 { return t.FileMS }},
		{"removal", func(t *throughputResult) []float64 { return t.TeardownMS }},
		{"whole sample", func(t *throughputResult) []float64 { return t.SampleMS }},
	} {
		b, c := st.get(pooled[0]), st.get(pooled[1])
		if len(b) == 0 || len(c) == 0 {
			continue
		}
		s.stepNames = append(s.stepNames, st.name)
		s.steps = append(s.steps, [2]float64{stats.Percentile(b, 50), stats.Percentile(c, 50)})
	}
	return s
}

// median is the middle value (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ratioText(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func goalText(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// renderFloor is the floor section's Markdown (without its markers).
func renderFloor(r *results, machine string) string {
	f, o := r.Floor, r.Opts
	s := summarizeFloor(f)
	var b strings.Builder
	fmt.Fprintf(&b, "Run on %s by %s; the floor phase took %s.\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.command(), r.FloorWall.Round(time.Second))
	if machine != "" {
		b.WriteString("```\n" + strings.TrimRight(machine, "\n") + "\n```\n\n")
	}
	fmt.Fprintf(&b, "%d rounds of %d samples per side, %d in flight; each round runs one batch per side, alternating which goes first. 1-minute load average as each round started (2 CPUs shared with other work): %s.\n\n",
		len(f.Rounds), o.FloorN, o.FloorConcurrency, strings.Join(f.Load, ", "))
	b.WriteString("| metric | composebox | bare API | composebox / bare | goal |\n|---|---:|---:|---:|---|\n")
	fmt.Fprintf(&b, "| throughput, samples/min (median of %d rounds) | %s | %s | %s | |\n", s.rounds, num(s.cbxMed, ""), num(s.bareMed, ""), ratioText(s.cbxMed, s.bareMed))
	var per []string
	for _, x := range s.ratios {
		per = append(per, fmt.Sprintf("%.2f×", x))
	}
	fmt.Fprintf(&b, "| throughput ratio, median of the rounds' (spread %.2f–%.2f×: %s) | | | %.2f× | ≥ 0.97×: %s |\n",
		s.ratioMin, s.ratioMax, strings.Join(per, ", "), s.ratioMed, goalText(s.ratioMed >= 0.97))
	fmt.Fprintf(&b, "| exec `true`, p50 ms (%d rounds) | %.1f | %.1f | %s | ≤ 1.15×: %s |\n", len(f.ExecCbx), s.execP50[1], s.execP50[0], ratioText(s.execP50[1], s.execP50[0]), goalText(s.execP50[0] > 0 && s.execP50[1]/s.execP50[0] <= 1.15))
	fmt.Fprintf(&b, "| exec `true`, p95 ms | %.1f | %.1f | %s | |\n", s.execP95[1], s.execP95[0], ratioText(s.execP95[1], s.execP95[0]))
	for i, name := range s.stepNames {
		fmt.Fprintf(&b, "| step p50 ms: %s | %.0f | %.0f | %s | |\n", name, s.steps[i][1], s.steps[i][0], ratioText(s.steps[i][1], s.steps[i][0]))
	}
	b.WriteString("\nRounds:\n\n")
	for i, rd := range f.Rounds {
		if rd.Bare == nil || rd.Cbx == nil {
			continue
		}
		line := fmt.Sprintf("- round %d (%s first): bare %d/%d in %.1f s (%.1f/min), composebox %d/%d in %.1f s (%.1f/min): %s",
			i+1, rd.First, rd.Bare.Done, rd.Bare.Samples, rd.Bare.WallS, rd.Bare.PerMin, rd.Cbx.Done, rd.Cbx.Samples, rd.Cbx.WallS, rd.Cbx.PerMin, ratioText(rd.Cbx.PerMin, rd.Bare.PerMin))
		if rd.Bare.TimedOut || rd.Cbx.TimedOut {
			line += "; STOPPED at its share of the time budget (not counted)"
		}
		b.WriteString(line + "\n")
	}
	for k, side := range []string{"bare", "composebox"} {
		if s.failed[k] > 0 {
			fmt.Fprintf(&b, "- %s: %d failed samples; first error: %s\n", side, s.failed[k], s.firstErr[k])
		}
	}
	if f.ExecErr != "" {
		fmt.Fprintf(&b, "- exec latency stopped: %s\n", f.ExecErr)
	}
	if f.Profiles != "" {
		fmt.Fprintf(&b, "- profiles: %s\n", f.Profiles)
	}
	return b.String()
}

// floorText is the floor's figures for the terminal.
func floorText(r *results) string {
	s := summarizeFloor(r.Floor)
	var b strings.Builder
	fmt.Fprintf(&b, "\nfloor: composebox %.1f/min, bare API %.1f/min (medians of %d rounds); ratio of the rounds: median %.2f×, %.2f–%.2f× (goal ≥ 0.97×)\n",
		s.cbxMed, s.bareMed, s.rounds, s.ratioMed, s.ratioMin, s.ratioMax)
	fmt.Fprintf(&b, "floor: exec `true` p50 composebox %.1f ms, bare %.1f ms (%s, goal ≤ 1.15×); p95 %.1f / %.1f ms\n",
		s.execP50[1], s.execP50[0], ratioText(s.execP50[1], s.execP50[0]), s.execP95[1], s.execP95[0])
	for i, name := range s.stepNames {
		fmt.Fprintf(&b, "floor: step p50 %-55s composebox %7.0f ms  bare %7.0f ms\n", name, s.steps[i][1], s.steps[i][0])
	}
	return b.String()
}

// command says how the run was started: the make target, and the program's own arguments.
func (r *results) command() string {
	target := "make bench"
	if r.Opts.Phases == "floor" {
		target = "make bench-floor"
	}
	return fmt.Sprintf("`%s` (`bin/cbxbench %s`)", target, strings.Join(r.Opts.Args, " "))
}

// writeFloorSection puts text between the floor section's markers in path, replacing an earlier
// run's figures. Without the markers, it adds the section's heading and markers before the other
// benchmarks' sections (or at the end).
func writeFloorSection(path, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	begin, end := "<!-- "+floorSection+":begin -->", "<!-- "+floorSection+":end -->"
	section := begin + "\n" + text + end + "\n"
	if i := strings.Index(s, begin); i >= 0 {
		if j := strings.Index(s[i:], end); j >= 0 {
			rest := strings.TrimPrefix(s[i+j+len(end):], "\n")
			return os.WriteFile(path, []byte(s[:i]+section+rest), 0o644)
		}
	}
	block := floorHeading + " (`make bench-floor`)\n\n" + section
	at := -1
	for _, head := range []string{poolSection, apiSection} {
		if i := strings.Index(s, "\n"+head); i >= 0 && (at < 0 || i < at) {
			at = i + 1
		}
	}
	if at < 0 {
		return os.WriteFile(path, []byte(strings.TrimRight(s, "\n")+"\n\n"+block), 0o644)
	}
	return os.WriteFile(path, []byte(s[:at]+block+"\n"+s[at:]), 0o644)
}
