package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/composebox/composebox/internal/errdefs"
)

// What a backend may do beyond Backend is optional, one small interface per concern: a backend
// implements those it can, and says so at compile time (var _ backend.Pooler = (*Backend)(nil)).
// Callers find them with the As helpers below; a verb whose interface is missing fails with
// Lacks's *UnsupportedError, which names the verb and the backend's kind. What is a fact
// rather than a verb is declared as data, in Capabilities.
//
// The optional interfaces declared elsewhere in this package follow the same pattern: Forker
// (fork.go), Egress and EgressWatcher (egress.go), Placer and EngineLister (engines.go), SweepFinisher
// (select.go), RetryNotifier (backend.go).

// Capabilities are the facts about a backend that are not verbs. The zero value declares
// none: a backend that does not implement Capable has none of them.
type Capabilities struct {
	// HostReaper: the watchdog of a program whose main runs orchestrator.ReaperMain (a Docker
	// client reaching Endpoint) can remove this backend's samples; any other backend needs a
	// main that runs backends.ReaperMain, whose watchdog rebuilds the backend itself.
	HostReaper bool
}

// Capable is a backend that declares Capabilities.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf is what b declares; the zero value when it declares nothing.
func CapabilitiesOf(b Engine) Capabilities {
	if c, ok := b.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// Classifier is a backend that tells its engine's passing trouble and its absence from other
// failures, so that the orchestrator never matches an engine's message. Without it, no error
// is either.
type Classifier interface {
	// Transient reports an error that may well pass if the same idempotent call is made again
	// (a reset connection, an overloaded engine). A cancelled context never is.
	Transient(err error) bool
	// Unreachable reports an error that says the engine could not be reached at all (a
	// stopped daemon, a socket that is gone).
	Unreachable(err error) bool
}

// Transient is b's Transient, false for a backend that does not classify its errors.
func Transient(b Engine, err error) bool {
	c, ok := b.(Classifier)
	return ok && c.Transient(err)
}

// Unreachable is b's Unreachable, false for a backend that does not classify its errors.
func Unreachable(b Engine, err error) bool {
	c, ok := b.(Classifier)
	return ok && c.Unreachable(err)
}

// Doctor is a backend that checks its own setup, as `composebox doctor` prints it. Without
// it the doctor reports Ping alone.
type Doctor interface {
	// Doctor runs every check of the engine's setup.
	Doctor(ctx context.Context, opts DoctorOptions) Report
}

// AsDoctor is b as a Doctor.
func AsDoctor(b Engine) (Doctor, bool) { d, ok := b.(Doctor); return d, ok }

// ImageMover is a backend that brings images to and from its engine without a registry.
type ImageMover interface {
	// SaveImages writes refs to w as one archive LoadImages takes.
	SaveImages(ctx context.Context, refs []string, w io.Writer) error
	// LoadImages loads an archive SaveImages wrote.
	LoadImages(ctx context.Context, r io.Reader) error
}

// AsImageMover is b as an ImageMover.
func AsImageMover(b Engine) (ImageMover, bool) { m, ok := b.(ImageMover); return m, ok }

// Pruner is a backend that lists and prunes the images composebox built for tasks.
type Pruner interface {
	// ListImages lists the images carrying every label of sel ("key=value" or "key").
	ListImages(ctx context.Context, sel []string) ([]ImageInfo, error)
	// PruneImages removes the images composebox built for tasks, but those of the tasks in
	// opts.Keep, those a container uses and composebox's own base image.
	PruneImages(ctx context.Context, opts PruneImagesOptions) (ImageReport, error)
}

// AsPruner is b as a Pruner.
func AsPruner(b Engine) (Pruner, bool) { p, ok := b.(Pruner); return p, ok }

// Pooler is a backend that records warm pools' hand-overs where every process sees them: a
// sample warm in a pool, and its claim by a SampleInit. Claims are atomic across processes.
// Without it a task cannot keep a warm pool.
type Pooler interface {
	// MarkWarm records a ready pooled sample nobody took yet.
	MarkWarm(ctx context.Context, m WarmMarker) error
	// Claim takes a warm sample: true for exactly one caller, which is recorded as m.Owner.
	Claim(ctx context.Context, m Marker) (bool, error)
	// Take is the first half of a claim, for a process that records the claim later
	// (RecordClaim): true for exactly one caller.
	Take(ctx context.Context, project string) (bool, error)
	// RecordClaim records who took a sample that Take gave.
	RecordClaim(ctx context.Context, m Marker) error
	// WarmProjects lists the free pooled samples of task, oldest first.
	WarmProjects(ctx context.Context, task string) ([]WarmProject, error)
}

// AsPooler is b as a Pooler.
func AsPooler(b Engine) (Pooler, bool) { p, ok := b.(Pooler); return p, ok }

// Detacher is a backend that can hand a sample over (`composebox up`): its marker tells every
// process that no owner's teardown removes the sample any more.
type Detacher interface {
	// MarkDetached hands the sample over.
	MarkDetached(ctx context.Context, m Marker) error
}

// AsDetacher is b as a Detacher.
func AsDetacher(b Engine) (Detacher, bool) { d, ok := b.(Detacher); return d, ok }

// Owners is a backend that finds one owner's projects faster than a whole listing.
type Owners interface {
	// OwnedProjects names the projects of task whose resources owner created, detached ones
	// left out.
	OwnedProjects(ctx context.Context, task, owner string) ([]string, error)
}

// OwnedProjects names the projects of task whose resources owner created, detached ones left
// out: b's OwnedProjects, else from its ListProjects.
func OwnedProjects(ctx context.Context, b Backend, task, owner string) ([]string, error) {
	if o, ok := b.(Owners); ok {
		return o.OwnedProjects(ctx, task, owner)
	}
	all, err := b.ListProjects(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range all {
		if p.Task == task && p.Owner == owner && p.Status != StatusDetached {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// DetachedExecer is a backend that starts a command in a container and leaves it running.
type DetachedExecer interface {
	// ExecDetached starts req and returns its exec id at once.
	ExecDetached(ctx context.Context, t Target, req ExecRequest) (string, error)
}

// AsDetachedExecer is b as a DetachedExecer.
func AsDetachedExecer(b Engine) (DetachedExecer, bool) { d, ok := b.(DetachedExecer); return d, ok }

// Diagnoser is a backend that explains a container that cannot run anything.
type Diagnoser interface {
	// Diagnose explains the container (a missing one is a Diagnosis with Missing set).
	Diagnose(ctx context.Context, t Target) (Diagnosis, error)
}

// AsDiagnoser is b as a Diagnoser.
func AsDiagnoser(b Engine) (Diagnoser, bool) { d, ok := b.(Diagnoser); return d, ok }

// Shell is a backend whose containers a person can enter from a terminal.
type Shell interface {
	// ShellCommand is the command a person types to enter the container c with shell (as
	// user, when not empty): `docker exec -it NAME sh` for Docker.
	ShellCommand(c ContainerInfo, user, shell string) string
}

// AsShell is b as a Shell.
func AsShell(b Engine) (Shell, bool) { s, ok := b.(Shell); return s, ok }

// FileBuffers is a backend with whole-buffer file calls of its own, quicker than the streams.
type FileBuffers interface {
	ReadFile(ctx context.Context, t Target, path string, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, t Target, path string, data []byte) error
}

// ReadFile reads the file at path whole, failing with ErrOutputLimit past limit bytes (0: the
// backend's default): b's own ReadFile, else its ReadFileTo into a buffer.
func ReadFile(ctx context.Context, b Sandboxes, t Target, path string, limit int64) ([]byte, error) {
	if f, ok := b.(FileBuffers); ok {
		return f.ReadFile(ctx, t, path, limit)
	}
	var buf bytes.Buffer
	if _, err := b.ReadFileTo(ctx, t, path, &buf, limit); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes data to the file at path: b's own WriteFile, else its WriteFileFrom.
func WriteFile(ctx context.Context, b Sandboxes, t Target, path string, data []byte) error {
	if f, ok := b.(FileBuffers); ok {
		return f.WriteFile(ctx, t, path, data)
	}
	return b.WriteFileFrom(ctx, t, path, bytes.NewReader(data), int64(len(data)))
}

// EngineNamer is a backend of one engine that names it in listings (Project.Engine).
type EngineNamer interface {
	// Name names the engine (DefaultEngine for Docker's).
	Name() string
}

// EngineName is b's engine name, "" when b does not say.
func EngineName(b Engine) string {
	if n, ok := b.(EngineNamer); ok {
		return n.Name()
	}
	return ""
}

// Explainer is a backend that says why it lacks a verb (Unsupported asks it).
type Explainer interface {
	UnsupportedReason(op string) string
}

// AsPlacer is b as a Placer.
func AsPlacer(b Engine) (Placer, bool) { p, ok := b.(Placer); return p, ok }

// AsEngineLister is b as an EngineLister.
func AsEngineLister(b Engine) (EngineLister, bool) { l, ok := b.(EngineLister); return l, ok }

// AsForker is b as a Forker.
func AsForker(b Engine) (Forker, bool) { f, ok := b.(Forker); return f, ok }

// AsEgress is b as an Egress.
func AsEgress(b Engine) (Egress, bool) { e, ok := b.(Egress); return e, ok }

// Lacks is the *UnsupportedError of op on b, which does not implement the optional interface
// named iface ("backend.Pooler").
func Lacks(op string, b Engine, iface string) error {
	return &UnsupportedError{Op: op, Backend: b.Kind(), Reason: fmt.Sprintf("it does not implement %s", iface)}
}

// RunDoctor is b's Doctor, else a report of its Ping alone followed by opts.Extra.
func RunDoctor(ctx context.Context, b Engine, opts DoctorOptions) Report {
	if d, ok := b.(Doctor); ok {
		return d.Doctor(ctx, opts)
	}
	r := Report{OK: true}
	if info, err := b.Ping(ctx, opts.PingTimeout); err != nil {
		r.Checks = append(r.Checks, Check{Name: "engine", Status: Fail, Detail: err.Error()})
	} else {
		r.Checks = append(r.Checks, Check{Name: "engine", Status: Pass, Detail: fmt.Sprintf("the %s backend at %s answers", b.Kind(), info.Endpoint)})
	}
	r.Checks = append(r.Checks, opts.Extra...)
	for _, c := range r.Checks {
		r.OK = r.OK && c.Status != Fail
	}
	return r
}

// Diagnose explains a container that cannot run anything: b's Diagnose, else what Inspect
// says of it (a removed one is Missing).
func Diagnose(ctx context.Context, b Sandboxes, t Target) (Diagnosis, error) {
	if d, ok := b.(Diagnoser); ok {
		return d.Diagnose(ctx, t)
	}
	info, err := b.Inspect(ctx, t.Container)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return Diagnosis{Container: t.Container, Missing: true}, nil
	case err != nil:
		return Diagnosis{}, err
	}
	return Diagnosis{Container: t.Container, Name: info.Name, Status: info.State, Running: info.Running,
		Paused: info.State == "paused", ExitCode: info.ExitCode, OOMKilled: info.OOMKilled}, nil
}
