// Package fakebackend is an in-memory orchestrator backend for engine-free tests: projects
// whose containers are fake processes with scripted exec results, an in-memory file system per
// container, markers with atomic claims, a death watch a test can trigger, and an engine that a
// test can take away (every call then fails as a lost daemon's would). It is safe for
// concurrent use, and meant to run under -race.
package fakebackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
	"github.com/composebox/composebox/orchestrator/backend"
)

// ErrEngineDown is every call's error while the engine is down (SetDown): Unreachable says so.
var ErrEngineDown = errors.New("fake engine: cannot connect")

// ErrTransient is an error Transient says may pass on a retry (see FailNext).
var ErrTransient = errors.New("fake engine: connection reset")

// Script runs one exec: it reads req.Stdin (or StdinReader), writes to stdout and stderr, and
// returns the exit code. ctx ends when the exec is killed, times out or is cancelled.
type Script func(ctx context.Context, c Container, req backend.ExecRequest, stdout, stderr io.Writer) int

// Container is a fake container as a Script sees it.
type Container struct {
	ID, Name, Project, Service string
	Labels                     map[string]string
}

// Backend is the fake engine.
type Backend struct {
	// Exits makes the named services exit with that code as soon as they start (a one-shot
	// service: 0 is done, anything else fails the sample).
	Exits map[string]int
	// ExitOutput is what the named services of Exits print before they exit (their logs).
	ExitOutput map[string]string

	mu         sync.Mutex
	script     Script
	images     map[string]backend.ImageInfo
	containers map[string]*container // by id
	networks   map[string]map[string]string
	markers    map[string]map[string]string
	watchers   map[*watcher]bool
	down       atomic.Bool
	failNext   map[string]error
	calls      map[string]int
	dead       map[string]bool // owners to report as dead (stale)
}

type container struct {
	Container
	running  bool
	exitCode int
	// health is "healthy" for a service with a healthcheck, "" without one.
	health  string
	files   map[string][]byte
	workdir string
	logs    []byte
	// died is closed when the container stops: the commands running in it end.
	died chan struct{}
}

type watcher struct {
	sel    []string
	deaths chan backend.Death
	ctx    context.Context
}

// The fake does every optional verb the engine-free tests drive, but fork and egress. It
// declares no Capabilities: no watchdog process sees its memory.
var (
	_ backend.Backend        = (*Backend)(nil)
	_ backend.Classifier     = (*Backend)(nil)
	_ backend.Doctor         = (*Backend)(nil)
	_ backend.ImageMover     = (*Backend)(nil)
	_ backend.Pruner         = (*Backend)(nil)
	_ backend.Pooler         = (*Backend)(nil)
	_ backend.Detacher       = (*Backend)(nil)
	_ backend.Owners         = (*Backend)(nil)
	_ backend.DetachedExecer = (*Backend)(nil)
	_ backend.Diagnoser      = (*Backend)(nil)
	_ backend.Shell          = (*Backend)(nil)
	_ backend.FileBuffers    = (*Backend)(nil)
)

// nextID numbers containers across every fake engine, as real engines' ids are unique: a
// backend of several fakes tells containers apart by id.
var nextID atomic.Int64

// New returns an empty fake engine whose execs run DefaultScript.
func New() *Backend {
	return &Backend{
		script: DefaultScript, images: map[string]backend.ImageInfo{}, containers: map[string]*container{},
		networks: map[string]map[string]string{}, markers: map[string]map[string]string{}, watchers: map[*watcher]bool{},
		failNext: map[string]error{}, calls: map[string]int{}, dead: map[string]bool{},
	}
}

// SetScript makes every later exec run s.
func (b *Backend) SetScript(s Script) {
	b.mu.Lock()
	b.script = s
	b.mu.Unlock()
}

// SetDown takes the engine away (true) or brings it back.
func (b *Backend) SetDown(down bool) { b.down.Store(down) }

// FailNext makes the next call of op (a method name: "Up", "Down", "Claim"...) fail with err.
func (b *Backend) FailNext(op string, err error) {
	b.mu.Lock()
	b.failNext[op] = err
	b.mu.Unlock()
}

// Calls counts the calls of op so far.
func (b *Backend) Calls(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[op]
}

// AddImage makes ref present, with lbl.
func (b *Backend) AddImage(ref string, lbl map[string]string) {
	b.mu.Lock()
	b.images[ref] = backend.ImageInfo{ID: "sha256:" + ref, Labels: lbl}
	b.mu.Unlock()
}

// MarkOwnerDead makes projects of owner stale.
func (b *Backend) MarkOwnerDead(owner string) {
	b.mu.Lock()
	b.dead[owner] = true
	b.mu.Unlock()
}

// call records op and fails it when the engine is down or a failure was scheduled for it.
// It is called with b.mu held.
func (b *Backend) callLocked(op string) error {
	b.calls[op]++
	if b.down.Load() {
		return fmt.Errorf("%s: %w", strings.ToLower(op), ErrEngineDown)
	}
	if err, ok := b.failNext[op]; ok {
		delete(b.failNext, op)
		return err
	}
	return nil
}

func (b *Backend) call(op string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.callLocked(op)
}

func (b *Backend) Kind() string     { return "fake" }
func (b *Backend) Endpoint() string { return "fake://" }
func (b *Backend) Close() error     { return nil }

func (b *Backend) Ping(_ context.Context, _ time.Duration) (backend.Info, error) {
	if err := b.call("Ping"); err != nil {
		return backend.Info{}, errdefs.Wrap(errdefs.ErrPrerequisite, err, "ping fake engine")
	}
	return backend.Info{Endpoint: b.Endpoint(), APIVersion: "1.41", OSType: "linux", MemTotal: 8 << 30}, nil
}

func (b *Backend) Doctor(_ context.Context, opts backend.DoctorOptions) backend.Report {
	c := backend.Check{Name: "daemon", Status: backend.Pass, Detail: "fake engine"}
	if b.down.Load() {
		c = backend.Check{Name: "daemon", Status: backend.Fail, Detail: ErrEngineDown.Error()}
	}
	r := backend.Report{OK: c.Status != backend.Fail, Checks: append([]backend.Check{c}, opts.Extra...)}
	return r
}

func (b *Backend) Transient(err error) bool   { return errors.Is(err, ErrTransient) }
func (b *Backend) Unreachable(err error) bool { return errors.Is(err, ErrEngineDown) }

// BaseImage makes composebox's base image present under the reference TaskInit expects.
func (b *Backend) BaseImage(_ context.Context) (string, error) {
	if err := b.call("BaseImage"); err != nil {
		return "", err
	}
	ref, err := imagespec.BaseRef(imagespec.DefaultBusybox)
	if err != nil {
		ref = "composebox/base:fake"
	}
	b.AddImage(ref, map[string]string{labels.LabelManaged: "true", labels.LabelImage: "base"})
	return ref, nil
}

func (b *Backend) Image(_ context.Context, ref string) (backend.ImageInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Image"); err != nil {
		return backend.ImageInfo{}, err
	}
	img, ok := b.images[ref]
	if !ok {
		return backend.ImageInfo{}, errdefs.New(errdefs.ErrNotFound, "image "+ref+": no such image")
	}
	return img, nil
}

func (b *Backend) Build(ctx context.Context, svc types.ServiceConfig, opts backend.BuildOptions) (bool, error) {
	b.mu.Lock()
	if err := b.callLocked("Build"); err != nil {
		b.mu.Unlock()
		return false, err
	}
	_, have := b.images[opts.Tag]
	b.mu.Unlock()
	if have {
		return false, nil
	}
	if opts.Limit != nil {
		release, err := opts.Limit(ctx)
		if err != nil {
			return false, err
		}
		defer release()
	}
	b.AddImage(opts.Tag, maps.Clone(opts.Labels))
	return true, nil
}

// SaveImages writes the refs, one a line: the fake's archive.
func (b *Backend) SaveImages(_ context.Context, refs []string, w io.Writer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("SaveImages"); err != nil {
		return err
	}
	for _, r := range refs {
		if _, ok := b.images[r]; !ok {
			return errdefs.New(errdefs.ErrNotFound, "image "+r+": no such image")
		}
		if _, err := fmt.Fprintln(w, r); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) LoadImages(_ context.Context, r io.Reader) error {
	if err := b.call("LoadImages"); err != nil {
		return err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	for _, ref := range strings.Fields(string(data)) {
		b.AddImage(ref, nil)
	}
	return nil
}

// Up creates one running container per service and records the project's networks.
func (b *Backend) Up(ctx context.Context, p *types.Project, opts backend.UpOptions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Up"); err != nil {
		return fmt.Errorf("up project %s: %w", p.Name, err)
	}
	for key, n := range p.Networks {
		if n.External {
			continue
		}
		lbl := maps.Clone(map[string]string(n.Labels))
		if lbl == nil {
			lbl = map[string]string{}
		}
		maps.Copy(lbl, n.CustomLabels)
		lbl[labels.ComposeProjectLabel] = p.Name
		b.networks[p.Name+"_"+key] = lbl
	}
	for _, name := range p.ServiceNames() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("up project %s: %w", p.Name, err)
		}
		svc := p.Services[name]
		if _, ok := b.images[svc.Image]; !ok && svc.Image != "" {
			return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("up project %s: image %s: no such image", p.Name, svc.Image))
		}
		lbl := maps.Clone(map[string]string(svc.Labels))
		if lbl == nil {
			lbl = map[string]string{}
		}
		maps.Copy(lbl, svc.CustomLabels)
		id := fmt.Sprintf("%064x", nextID.Add(1))
		c := &container{Container: Container{ID: id, Name: p.Name + "-" + name + "-1", Project: p.Name, Service: name, Labels: lbl},
			running: true, files: map[string][]byte{}, workdir: svc.WorkingDir, died: make(chan struct{})}
		if c.workdir == "" {
			c.workdir = "/"
		}
		if svc.HealthCheck != nil && !svc.HealthCheck.Disable {
			c.health = "healthy"
		}
		if code, ok := b.Exits[name]; ok {
			c.running, c.exitCode, c.health = false, code, ""
			c.logs = []byte(b.ExitOutput[name])
			close(c.died)
		}
		b.containers[id] = c
		if opts.OnProgress != nil {
			opts.OnProgress(name, "started")
		}
	}
	return nil
}

// Wait reports every service: running ones are ready, one that exited 0 is done, any other
// fails the wait with a *backend.NotReadyError naming it, with its logs.
func (b *Backend) Wait(_ context.Context, p *types.Project, opts backend.WaitOptions) ([]backend.ServiceState, error) {
	start := time.Now()
	b.mu.Lock()
	if err := b.callLocked("Wait"); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	var states, failed []backend.ServiceState
	for _, c := range b.containers {
		if c.Project != p.Name {
			continue
		}
		st := backend.ServiceState{Service: c.Service, ContainerID: c.ID, Container: c.Name, State: "running", Health: c.health, Ready: true,
			WorkingDir: c.workdir, User: p.Services[c.Service].User}
		if !c.running {
			st.State, st.ExitCode, st.Ready = "exited", c.exitCode, c.exitCode == 0
			if c.exitCode != 0 {
				st.Logs = string(c.logs)
				failed = append(failed, st)
			}
		}
		states = append(states, st)
	}
	b.mu.Unlock()
	byService := func(a, b backend.ServiceState) int { return strings.Compare(a.Service, b.Service) }
	slices.SortFunc(states, byService)
	if len(failed) > 0 {
		slices.SortFunc(failed, byService)
		return states, &backend.NotReadyError{Project: p.Name, Reason: "exited", Waited: time.Since(start), Services: failed}
	}
	if opts.OnReady != nil {
		for _, st := range states {
			opts.OnReady(st)
		}
	}
	return states, nil
}

// Down removes the project's containers, networks and markers; a running container's removal
// is a death.
func (b *Backend) Down(_ context.Context, project string, _ backend.DownOptions) (backend.Removed, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Down"); err != nil {
		return backend.Removed{}, fmt.Errorf("remove project %s: %w", project, err)
	}
	var r backend.Removed
	for id, c := range b.containers {
		if c.Project != project {
			continue
		}
		if c.running {
			c.running, c.exitCode = false, 137
			b.dieLocked(c)
		}
		delete(b.containers, id)
		r.Containers++
	}
	for name, lbl := range b.networks {
		if lbl[labels.ComposeProjectLabel] == project {
			delete(b.networks, name)
			r.Networks++
		}
	}
	for name := range b.markers {
		if labels.IsMarker(project, name) {
			delete(b.markers, name)
		}
	}
	return r, nil
}

// Kill stops a running container, as if its main process died, and reports the death.
func (b *Backend) Kill(id string, code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.containers[id]; ok && c.running {
		c.running, c.exitCode = false, code
		b.dieLocked(c)
	}
}

// dieLocked tells the watchers whose selector matches c.
func (b *Backend) dieLocked(c *container) {
	close(c.died)
	for w := range b.watchers {
		if matches(c.Labels, w.sel) {
			d := backend.Death{Project: c.Project, Service: c.Service, Container: c.Name, ContainerID: c.ID}
			go func() {
				select {
				case w.deaths <- d:
				case <-w.ctx.Done():
				}
			}()
		}
	}
}

// Projects lists the names of live projects, sorted.
func (b *Backend) Projects() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for _, c := range b.containers {
		seen[c.Project] = true
	}
	for _, lbl := range b.networks {
		seen[lbl[labels.ComposeProjectLabel]] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Markers lists the marker names, sorted.
func (b *Backend) Markers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.markers))
}

// ContainersOf returns the ids of project's containers, by service.
func (b *Backend) ContainersOf(project string) map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for _, c := range b.containers {
		if c.Project == project {
			out[c.Service] = c.ID
		}
	}
	return out
}

func matches(lbl map[string]string, sel []string) bool {
	for _, s := range sel {
		k, v, hasValue := strings.Cut(s, "=")
		got, ok := lbl[k]
		if !ok || (hasValue && got != v) {
			return false
		}
	}
	return true
}

func (b *Backend) WatchDeaths(ctx context.Context, opts backend.WatchOptions) (<-chan backend.Death, <-chan error) {
	errs := make(chan error, 1)
	deaths := make(chan backend.Death)
	if err := b.call("WatchDeaths"); err != nil {
		close(deaths)
		errs <- err
		return deaths, errs
	}
	w := &watcher{sel: opts.Labels, deaths: make(chan backend.Death), ctx: ctx}
	b.mu.Lock()
	b.watchers[w] = true
	b.mu.Unlock()
	go func() {
		defer close(deaths)
		defer func() {
			b.mu.Lock()
			delete(b.watchers, w)
			b.mu.Unlock()
		}()
		for {
			select {
			case d := <-w.deaths:
				select {
				case deaths <- d:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			case <-ctx.Done():
				errs <- ctx.Err()
				return
			}
		}
	}()
	return deaths, errs
}

// Watchers counts the death watches open.
func (b *Backend) Watchers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.watchers)
}

func (b *Backend) Containers(_ context.Context, sel []string, all bool) ([]backend.Container, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Containers"); err != nil {
		return nil, err
	}
	var out []backend.Container
	for _, c := range b.containers {
		if !matches(c.Labels, sel) || (!all && !c.running) {
			continue
		}
		out = append(out, backend.Container{ID: c.ID, Name: c.Name, Labels: maps.Clone(c.Labels), State: c.state(), Status: c.state()})
	}
	slices.SortFunc(out, func(a, b backend.Container) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *container) state() string {
	if c.running {
		return backend.StateRunning
	}
	return "exited"
}

// resources are every labelled resource of the fake, by project: containers, networks and
// markers.
func (b *Backend) resourcesLocked() map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for _, c := range b.containers {
		out[c.Project] = append(out[c.Project], c.Labels)
	}
	for _, lbl := range b.networks {
		out[lbl[labels.ComposeProjectLabel]] = append(out[lbl[labels.ComposeProjectLabel]], lbl)
	}
	for _, lbl := range b.markers {
		out[lbl[labels.ComposeProjectLabel]] = append(out[lbl[labels.ComposeProjectLabel]], lbl)
	}
	return out
}

func (b *Backend) OwnedProjects(_ context.Context, task, owner string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("OwnedProjects"); err != nil {
		return nil, err
	}
	var out []string
	for project, res := range b.resourcesLocked() {
		if _, detached := b.markers[labels.MarkerName(labels.MarkerDetached, project)]; detached {
			continue
		}
		for _, lbl := range res {
			if lbl[labels.LabelTask] == task && lbl[labels.LabelOwner] == owner {
				out = append(out, project)
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (b *Backend) ListProjects(_ context.Context) ([]backend.Project, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("ListProjects"); err != nil {
		return nil, err
	}
	return b.listLocked(), nil
}

// listLocked sums each project up with backend.Summary, as every backend does: owners,
// staleness, pool state, health and counts follow the same policy.
func (b *Backend) listLocked() []backend.Project {
	sums := map[string]*backend.Summary{}
	sum := func(project string, lbl map[string]string) *backend.Summary {
		s := sums[project]
		if s == nil {
			s = backend.NewSummary(project)
			sums[project] = s
		}
		s.Labels(lbl, time.Time{})
		return s
	}
	for _, c := range b.containers {
		sum(c.Project, c.Labels).Container(backend.SummaryContainer{Name: c.Name, Service: c.Service, State: c.state(),
			ExitCode: c.exitCode, ExitKnown: !c.running, Health: c.health})
	}
	for _, lbl := range b.networks {
		sum(lbl[labels.ComposeProjectLabel], lbl).Network(1)
	}
	// Only a marker says that a project is detached, warm or claimed.
	rank := map[string]int{labels.PoolPooled: 1, labels.PoolWarm: 2, labels.PoolClaimed: 3}
	for name, lbl := range b.markers {
		project := lbl[labels.ComposeProjectLabel]
		s := sum(project, lbl)
		switch name {
		case labels.MarkerName(labels.MarkerDetached, project):
			s.Detached()
		case labels.MarkerName(labels.MarkerClaim, project):
			s.Sample(lbl[labels.LabelSample])
		}
		if pool := lbl[labels.LabelPool]; rank[pool] > rank[s.PoolState()] {
			s.Pool(pool)
		}
	}
	statuses := backend.OwnerStatuses()
	status := func(owner string) backend.OwnerStatus {
		if b.dead[owner] {
			return backend.StatusStale
		}
		// A test names owners freely ("me"): what no host can check is taken as alive here.
		if st := statuses(owner); st != backend.StatusUnknown {
			return st
		}
		return backend.StatusAlive
	}
	out := make([]backend.Project, 0, len(sums))
	for _, s := range sums {
		out = append(out, s.Project(status))
	}
	backend.SortProjects(out)
	return out
}

// Sweep is backend.Sweep, the selection and sweep every backend shares.
func (b *Backend) Sweep(ctx context.Context, sel backend.Selector, opts backend.RemoveOptions) ([]backend.SweepResult, error) {
	b.mu.Lock()
	err := b.callLocked("Sweep")
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return backend.Sweep(ctx, b, sel, opts)
}

// ListImages lists the images whose labels match every entry of sel.
func (b *Backend) ListImages(_ context.Context, sel []string) ([]backend.ImageInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("ListImages"); err != nil {
		return nil, err
	}
	var out []backend.ImageInfo
	for _, img := range b.images {
		if matches(img.Labels, sel) {
			out = append(out, img)
		}
	}
	slices.SortFunc(out, func(x, y backend.ImageInfo) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// PruneImages removes the task images (a managed label and a task label) of the tasks not in
// opts.Keep; each counts one byte.
func (b *Backend) PruneImages(_ context.Context, opts backend.PruneImagesOptions) (backend.ImageReport, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rep := backend.ImageReport{Removed: []backend.PrunedImage{}}
	if err := b.callLocked("PruneImages"); err != nil {
		return rep, err
	}
	refs := slices.Sorted(maps.Keys(b.images))
	for _, ref := range refs {
		img := b.images[ref]
		task := img.Labels[labels.LabelTask]
		if img.Labels[labels.LabelManaged] != "true" || task == "" || (opts.Task != "" && task != opts.Task) {
			continue
		}
		pi := backend.PrunedImage{ID: img.ID, Tags: []string{ref}, Task: task, Size: 1, UniqueSize: 1}
		if why, ok := opts.Keep[task]; ok {
			pi.Reason = why
			rep.Kept = append(rep.Kept, pi)
			continue
		}
		rep.Removed = append(rep.Removed, pi)
		rep.BytesReclaimed++
		if !opts.DryRun {
			delete(b.images, ref)
		}
	}
	return rep, nil
}

// Markers, with the claim's atomicity under the fake's lock.

func markerLabels(m backend.Marker, pool string) map[string]string {
	return map[string]string{
		labels.ComposeProjectLabel: m.Project, labels.LabelManaged: "true", labels.LabelTask: m.Task,
		labels.LabelSample: m.Sample, labels.LabelOwner: m.Owner, labels.LabelPool: pool,
		labels.LabelCreated: time.Now().UTC().Format(time.RFC3339Nano),
	}
}

func (b *Backend) createMarkerLocked(name string, lbl map[string]string) error {
	if _, ok := b.markers[name]; ok {
		return errdefs.New(errdefs.ErrConflict, "marker "+name+" exists")
	}
	b.markers[name] = lbl
	return nil
}

func (b *Backend) MarkDetached(_ context.Context, m backend.Marker) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("MarkDetached"); err != nil {
		return err
	}
	name := labels.MarkerName(labels.MarkerDetached, m.Project)
	if _, ok := b.markers[name]; ok {
		return nil
	}
	lbl := markerLabels(m, "")
	delete(lbl, labels.LabelPool)
	lbl[labels.LabelOwner] = labels.OwnerDetached
	return b.createMarkerLocked(name, lbl)
}

func (b *Backend) MarkWarm(_ context.Context, m backend.WarmMarker) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("MarkWarm"); err != nil {
		return err
	}
	lbl := markerLabels(m.Marker, labels.PoolWarm)
	lbl[labels.LabelPoolConfig] = m.Fingerprint
	if m.Shared {
		lbl[labels.LabelPoolShared] = "true"
	}
	return b.createMarkerLocked(labels.MarkerName(labels.MarkerWarm, m.Project), lbl)
}

func (b *Backend) Take(_ context.Context, project string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("Take"); err != nil {
		return false, err
	}
	name := labels.MarkerName(labels.MarkerWarm, project)
	if _, ok := b.markers[name]; !ok {
		return false, nil
	}
	delete(b.markers, name)
	return true, nil
}

func (b *Backend) RecordClaim(_ context.Context, m backend.Marker) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("RecordClaim"); err != nil {
		return err
	}
	return b.createMarkerLocked(labels.MarkerName(labels.MarkerClaim, m.Project), markerLabels(m, labels.PoolClaimed))
}

func (b *Backend) Claim(ctx context.Context, m backend.Marker) (bool, error) {
	won, err := b.Take(ctx, m.Project)
	if !won || err != nil {
		return won, err
	}
	return true, b.RecordClaim(ctx, m)
}

func (b *Backend) WarmProjects(_ context.Context, task string) ([]backend.WarmProject, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.callLocked("WarmProjects"); err != nil {
		return nil, err
	}
	var out []backend.WarmProject
	for _, lbl := range b.markers {
		if lbl[labels.LabelPool] != labels.PoolWarm || lbl[labels.LabelTask] != task {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, lbl[labels.LabelCreated])
		out = append(out, backend.WarmProject{Created: created, WarmMarker: backend.WarmMarker{
			Marker:      backend.Marker{Project: lbl[labels.ComposeProjectLabel], Task: task, Sample: lbl[labels.LabelSample], Owner: lbl[labels.LabelOwner]},
			Fingerprint: lbl[labels.LabelPoolConfig], Shared: lbl[labels.LabelPoolShared] == "true",
		}})
	}
	slices.SortFunc(out, func(a, b backend.WarmProject) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Project, b.Project)
	})
	return out, nil
}

// resolve is p against the target's working directory.
func resolve(t backend.Target, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	wd := t.WorkingDir
	if wd == "" {
		wd = "/"
	}
	return path.Join(wd, p)
}

func itoa(n int) string { return strconv.Itoa(n) }
