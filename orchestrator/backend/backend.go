// Package backend is the boundary between the orchestrator and what runs its samples. The
// orchestrator owns this interface and speaks to its engine through nothing else; the Docker
// implementation is lifecycle/dockerbackend (over lifecycle, cleanup and prereqs), and
// internal/fakebackend is an in-memory one for engine-free tests.
//
// Every type here is neutral: no engine's client types appear in a signature. A project is a
// compose-go project (the model composebox polices and normalises), a container is named by
// the id its backend gave it, and resources are found by their labels (cleanup/labels).
//
// A whole sample lives on one backend. Errors keep composebox's categories
// (internal/errdefs); Transient and Unreachable say which failures are the engine's passing
// trouble or its absence, so that the orchestrator never matches an engine's message.
package backend

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
)

// Backend runs samples: one engine, or anything that can stand for one. Its methods are safe
// for concurrent use.
//
// Backend is the required contract, 21 methods: what every sample needs from start to
// teardown. Everything else a backend may do (warm pools, image transfer and pruning, doctor,
// fork, egress, placement over several engines...) is an optional interface of its own
// (optional.go), found with a type assertion through the As helpers; a verb whose interface a
// backend lacks fails with an *UnsupportedError naming the verb and the backend's kind.
type Backend interface {
	Engine
	Images
	Projects
	Sandboxes
	Inventory
	Watcher
}

// Engine is the backend as a whole: who it is, where it is, and whether it answers.
type Engine interface {
	// Kind names the implementation ("docker", "fake").
	Kind() string
	// Endpoint is where the engine is reached ("unix:///var/run/docker.sock"), for messages
	// and for a watchdog process that must reach the same engine.
	Endpoint() string
	// Ping checks what a task cannot start without, within timeout (0: the backend's
	// default), and returns the engine's facts. Failures are ErrPrerequisite.
	Ping(ctx context.Context, timeout time.Duration) (Info, error)
	// Close releases what the backend holds.
	Close() error
}

// RetryNotifier is a backend that retries transient errors of idempotent calls itself; the
// orchestrator asks to be told of each retry, which narrows its start ramp.
type RetryNotifier interface {
	OnRetry(fn func(op string, err error))
}

// Info is what the first contact with the engine learnt.
type Info struct {
	Endpoint   string
	APIVersion string
	OSType     string
	// MemTotal is the engine host's memory in bytes, when known.
	MemTotal int64
	// NCPU is the engine host's CPU count, when known.
	NCPU int
}

// Images are the images samples run: present or built. Bringing images from elsewhere and
// pruning them are optional (ImageMover, Pruner).
type Images interface {
	// BaseImage makes sure composebox's own base image exists and returns its reference.
	BaseImage(ctx context.Context) (string, error)
	// Image describes a present image; an absent one is ErrNotFound (the backend never pulls).
	Image(ctx context.Context, ref string) (ImageInfo, error)
	// Build builds svc's image as opts.Tag unless it exists, and reports whether it built.
	Build(ctx context.Context, svc types.ServiceConfig, opts BuildOptions) (bool, error)
}

// PruneImagesOptions configures PruneImages.
type PruneImagesOptions struct {
	// Task limits the pruning to one task's images.
	Task string
	// Keep maps each live task, whose images stay, to why it is live.
	Keep map[string]string
	// DryRun reports what would be removed, with estimated sizes, and removes nothing.
	DryRun bool
}

// PrunedImage is one image that PruneImages removed or kept.
type PrunedImage struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
	Task string   `json:"task"`
	// Size is the image's whole size, layers shared with other images included.
	Size int64 `json:"size"`
	// UniqueSize is what the image alone takes, which removing it frees (an estimate).
	UniqueSize int64 `json:"unique_size"`
	// Reason says why a kept image was kept.
	Reason string `json:"reason,omitempty"`
}

// ImageReport is the outcome of PruneImages.
type ImageReport struct {
	Removed []PrunedImage `json:"removed"`
	Kept    []PrunedImage `json:"kept,omitempty"`
	// BytesReclaimed is the space the engine freed (with DryRun: the estimate).
	BytesReclaimed int64 `json:"bytes_reclaimed"`
}

// ImageInfo is a present image.
type ImageInfo struct {
	ID     string
	Labels map[string]string
}

// BuildOptions configures Build.
type BuildOptions struct {
	// Tag is the reference the image gets: a content-hash tag, so that an existing one means
	// the same content was built before.
	Tag string
	// Labels are added to the image.
	Labels map[string]string
	// Limit, when set, bounds concurrent builds: it is called just before a build really runs,
	// and the build's turn ends when the returned release is called.
	Limit func(ctx context.Context) (release func(), err error)
	// HostAccess lets the build's steps reach the host's own addresses (the policy's
	// host-access).
	HostAccess bool
	// Roots are the directories the build's files may come from.
	Roots []string
	// AllowAddURL lets a Dockerfile ADD a URL (the add-url opt-in).
	AllowAddURL bool
}

// Projects start, wait for and remove a sample's project.
type Projects interface {
	// Up creates and starts the project's containers, like `docker compose up -d`: readiness
	// is Wait's job. The project is normalised (composebox's labels on every service).
	Up(ctx context.Context, p *types.Project, opts UpOptions) error
	// Wait waits until every service runs and, where it has a healthcheck, is healthy; a
	// service that exits 0 counts as done. It fails with the services that were not ready.
	Wait(ctx context.Context, p *types.Project, opts WaitOptions) ([]ServiceState, error)
	// Down removes the project's containers, networks, volumes and markers, found by labels
	// alone. A project that does not exist is not an error. It is the one teardown verb.
	Down(ctx context.Context, project string, opts DownOptions) (Removed, error)
}

// UpOptions configures Up. The zero value starts every service.
type UpOptions struct {
	// Wait configures the readiness checks of dependencies that must be ready before their
	// dependents start.
	Wait WaitOptions
	// OnProgress, if set, receives each step of each service's container ("creating",
	// "created", "starting", "started"); it must be quick and must not block.
	OnProgress func(service, status string)
	// HostAccess leaves the project's networks open to the host's own addresses.
	HostAccess bool
	// HostRoutes lets the project's own subnets and fixed addresses shadow the host's routes
	// and addresses (the policy's host-routes).
	HostRoutes bool
}

// WaitOptions configures Wait. The zero value derives the budget from the healthchecks.
type WaitOptions struct {
	// Timeout overrides the budget derived from the healthchecks.
	Timeout time.Duration
	// OnReady, when set, is called once per service as it becomes ready; it must be quick.
	OnReady func(ServiceState)
}

// ServiceState is one service container's state as Wait last saw it.
type ServiceState struct {
	Service     string `json:"service"`
	ContainerID string `json:"container_id"`
	Container   string `json:"container"`
	State       string `json:"state"`            // created, running, exited, dead, missing...
	Health      string `json:"health,omitempty"` // starting, healthy, unhealthy; empty without a healthcheck
	ExitCode    int    `json:"exit_code"`
	OOMKilled   bool   `json:"oom_killed,omitempty"`
	Ready       bool   `json:"ready"`
	// HealthOutput is the last healthcheck probe's output.
	HealthOutput string `json:"health_output,omitempty"`
	// Logs are the container's last log lines (filled for services that failed).
	Logs string `json:"logs,omitempty"`
	// WorkingDir is the container's working directory ("/" when the image sets none).
	WorkingDir string `json:"working_dir"`
	// User is the container's configured user ("" = root).
	User string `json:"user,omitempty"`
}

// DownOptions configures Down. The zero value is the sandbox default (1 s stop grace).
type DownOptions struct {
	// Grace is the stop grace before SIGKILL; negative kills at once.
	Grace time.Duration
}

// Removed counts what a teardown removed.
type Removed struct {
	Containers int `json:"containers"`
	Networks   int `json:"networks"`
	Volumes    int `json:"volumes"`
	Images     int `json:"images,omitempty"`
}

// Sandboxes are the I/O of a sample's running containers. Exec and file calls are never
// retried: a command run twice is worse than a command that failed. Files go as streams;
// ReadFile and WriteFile (optional.go) are their whole-buffer forms, for every backend.
type Sandboxes interface {
	// Exec runs req in the container and waits for it, its output bounded.
	Exec(ctx context.Context, t Target, req ExecRequest) (ExecResult, error)
	// ExecStream starts req and hands over its streams.
	ExecStream(ctx context.Context, t Target, req ExecRequest) (*Process, error)
	// ReadFileTo streams the file at path into w, failing with ErrOutputLimit past limit
	// bytes (0: the backend's default).
	ReadFileTo(ctx context.Context, t Target, path string, w io.Writer, limit int64) (int64, error)
	// WriteFileFrom writes size bytes of r to the file at path.
	WriteFileFrom(ctx context.Context, t Target, path string, r io.Reader, size int64) error
	// ReadDirTo writes the directory at path to w as a tar stream.
	ReadDirTo(ctx context.Context, t Target, path string, w io.Writer) error
	// WriteDirFrom unpacks the tar stream r into the directory at path.
	WriteDirFrom(ctx context.Context, t Target, path string, r io.Reader) error
	// Inspect describes a container; a removed one is ErrNotFound.
	Inspect(ctx context.Context, container string) (ContainerInfo, error)
	// Logs streams a container's output; a removed one is ErrNotFound.
	Logs(ctx context.Context, container string, opts LogsOptions) error
}

// ContainerInfo is one container as Inspect sees it.
type ContainerInfo struct {
	ID, Name string
	// State is the engine's container state: created, running, paused, restarting, removing,
	// exited or dead.
	State   string
	Running bool
	// Health is the healthcheck's verdict, or "" without a healthcheck.
	Health     string
	ExitCode   int
	OOMKilled  bool
	WorkingDir string
	User       string
	TTY        bool
	Ports      []Port
}

// Container states and a healthcheck's verdict that the orchestrator tells apart.
const (
	StateRunning    = "running"
	HealthUnhealthy = "unhealthy"
)

// Port is a published port, as the engine bound it.
type Port struct {
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
}

// LogsOptions selects a container's logs. Stdout and Stderr nil discard that stream.
type LogsOptions struct {
	Follow         bool
	Tail           int // > 0: last Tail lines; 0: all; < 0: none
	Since          time.Time
	Timestamps     bool
	Stdout, Stderr io.Writer
}

// Inventory finds what composebox made, by labels alone (cleanup/labels). It is exactly what
// Plan needs (Lister).
type Inventory interface {
	// Containers lists the containers carrying every label of sel ("key=value" or "key"),
	// stopped ones too when all.
	Containers(ctx context.Context, sel []string, all bool) ([]Container, error)
	// ListProjects lists every composebox project, from all its kinds of resources, each
	// summed up by a Summary.
	ListProjects(ctx context.Context) ([]Project, error)
}

// Selection and the sweep are not a backend's: Plan and Sweep (select.go) compute them over
// ListProjects, Containers and Down, once for every backend. The backends keep a Sweep method
// that is exactly Sweep, for their callers.

// Container is one listed container.
type Container struct {
	ID, Name string
	// Engine names the engine the container lives on ("default" for the one engine of a
	// single-engine backend, "" when the backend does not say).
	Engine string
	Labels map[string]string
	// State is the engine's container state; Status its human summary ("Up 3 minutes").
	State, Status string
}

// Project is one composebox project as its labels describe it. Its JSON is what `composebox ls
// --json` prints for a project.
type Project struct {
	Name   string `json:"name"`
	Task   string `json:"task"`
	Sample string `json:"sample"`
	// Engine names the engine the project lives on ("default" for the one engine of a
	// single-engine backend, "" when the backend does not say).
	Engine string `json:"engine,omitempty"`
	// Owner is the owner label, host:pid:start-time, or "detached" for a project handed over
	// (by `composebox up`, say).
	Owner string `json:"owner"`
	// Status says whether the owner is alive: alive, stale, detached or unknown (an owner on
	// another host); Stale is Status == "stale".
	Status OwnerStatus `json:"status"`
	Stale  bool        `json:"stale"`
	// Created is the earliest dev.composebox.created label of the project's resources (or
	// their creation time when unlabelled).
	Created time.Time `json:"created"`
	// Containers, Networks and Volumes count the project's resources. composebox's own marker
	// volumes (detached, warm, claimed) are not the project's volumes and are not counted.
	Containers int `json:"containers"`
	Networks   int `json:"networks"`
	Volumes    int `json:"volumes"`
	// Running counts the containers that run.
	Running int `json:"running"`
	// Health sums the containers up: "ok" when every one runs and none is unhealthy or still
	// starting its healthcheck (or exited 0, a finished one-shot), else the services that are
	// not, as "db:exited(137),web:unhealthy"; "" for a project with no container.
	Health string `json:"health,omitempty"`
	// Config is the project's compose files when its containers name them.
	Config string `json:"config,omitempty"`
	// ContainerNames names the project's containers, sorted.
	ContainerNames []string `json:"container_names,omitempty"`
	// Pool is set on a sample started for a task's warm pool: "warm" while it waits to be
	// taken, "claimed" once a SampleInit took it (Sample is then the id that SampleInit gave),
	// "pooled" in between (starting, or being taken); "" otherwise.
	Pool string `json:"pool,omitempty"`
	// Ports are the ports the project's running containers publish on the host, as the engine
	// bound them (an ephemeral port where the compose file fixed one), sorted.
	Ports []PublishedPort `json:"ports,omitempty"`
}

// OwnerStatus is what a project's owner label says about who holds it.
type OwnerStatus string

const (
	// StatusAlive: the owner process is running on this host.
	StatusAlive OwnerStatus = "alive"
	// StatusStale: the owner process is gone (or its pid now belongs to another process).
	StatusStale OwnerStatus = "stale"
	// StatusDetached: the project was handed over (`composebox up`); it is never stale.
	StatusDetached OwnerStatus = "detached"
	// StatusUnknown: the owner is on another host, or the label cannot be read. Never stale.
	StatusUnknown OwnerStatus = "unknown"
)

// PublishedPort is a port a project's container publishes on the host.
type PublishedPort struct {
	Service       string `json:"service"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
}

// String is the port as `docker ps` shows it, after its service: web:127.0.0.1:49153->80/tcp.
func (p PublishedPort) String() string {
	return fmt.Sprintf("%s:%s:%d->%d/%s", p.Service, p.HostIP, p.HostPort, p.ContainerPort, p.Protocol)
}

// Selector chooses the projects to sweep.
//
// Names select projects by project name, or by the name or id of one of their containers; a
// name that matches nothing selects nothing (it is already gone). Names cannot be combined with
// the other fields.
//
// Otherwise All or Stale says which projects are candidates, and Task and OlderThan narrow
// them: All is every project, detached and live ones included; Stale is only those whose owner
// process is dead (never a detached one, nor one whose owner is on another host).
type Selector struct {
	Names     []string
	All       bool
	Stale     bool
	Task      string
	OlderThan time.Duration
}

// IsZero reports whether s selects nothing at all.
func (s Selector) IsZero() bool {
	return len(s.Names) == 0 && !s.All && !s.Stale && s.Task == "" && s.OlderThan == 0
}

// Validate reports a selector that is empty, or mixes names with filters, as ErrInvalidConfig.
func (s Selector) Validate() error {
	switch {
	case len(s.Names) > 0 && (s.All || s.Stale || s.Task != "" || s.OlderThan != 0):
		return errdefs.New(errdefs.ErrInvalidConfig, "select projects: names cannot be combined with all, stale, task or older-than")
	case len(s.Names) > 0:
		return nil
	case s.OlderThan < 0:
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("select projects: negative older-than %s", s.OlderThan))
	case !s.All && !s.Stale && (s.Task != "" || s.OlderThan != 0):
		return errdefs.New(errdefs.ErrInvalidConfig, "select projects: task and older-than narrow all or stale: set one of them")
	case !s.All && !s.Stale:
		return errdefs.New(errdefs.ErrInvalidConfig, "select projects: nothing selected: give names, all or stale")
	}
	return nil
}

// Match reports whether p is selected by s's filters at time now. Names are not considered:
// resolving a container's name to its project is the backend's job.
func (s Selector) Match(p Project, now time.Time) bool {
	if !s.All && !s.Stale {
		return false
	}
	if s.Stale && !p.Stale {
		return false
	}
	if s.Task != "" && p.Task != s.Task {
		return false
	}
	if s.OlderThan > 0 && (p.Created.IsZero() || now.Sub(p.Created) < s.OlderThan) {
		return false
	}
	return true
}

// RemoveOptions tunes a removal; the zero value is the sandbox default.
type RemoveOptions struct {
	Grace time.Duration
	// DryRun selects the projects and removes nothing: each SweepResult is what would go.
	DryRun bool
}

// SweepResult is the outcome of removing one swept project.
type SweepResult struct {
	Project
	Removed Removed `json:"removed"`
	// Err is why the project could not be removed completely (nil when it was).
	Err error `json:"-"`
}

// Marker names a sample and the process acting on it.
type Marker struct {
	Project, Task, Sample, Owner string
}

// WarmMarker is a ready pooled sample: Fingerprint names its task's configuration, and
// Shared lets other processes take it.
type WarmMarker struct {
	Marker
	Fingerprint string
	Shared      bool
}

// WarmProject is a ready sample in some process's pool, as its warm marker describes it.
type WarmProject struct {
	WarmMarker
	Created time.Time
}

// Watcher is the death watch.
type Watcher interface {
	// WatchDeaths reports the deaths of containers carrying every label of opts.Labels,
	// since opts.Since, until ctx ends or the stream fails; the error channel then gets one
	// value (nil or not) and nothing more comes.
	WatchDeaths(ctx context.Context, opts WatchOptions) (<-chan Death, <-chan error)
}

// WatchOptions selects the deaths to watch.
type WatchOptions struct {
	Labels []string
	Since  time.Time
}

// Death is a container that stopped, named as Wait named it in its ServiceState, so that a
// watcher can match a death to a service without knowing the backend.
type Death struct {
	// Project is the compose project (the sample) the container belongs to.
	Project string
	// Service is the compose service the container runs.
	Service string
	// Container is the container's name (ServiceState.Container): the Docker container's
	// name, the Kubernetes pod's name.
	Container string
	// ContainerID is the id the backend's other verbs take (ServiceState.ContainerID,
	// Target.Container): the Docker container's id, namespace/pod on Kubernetes.
	ContainerID string
}

// DoctorOptions tunes Doctor. The zero value checks the default setup.
type DoctorOptions struct {
	PingTimeout time.Duration
	Busybox     string
	// Extra are checks computed by the caller (the policy in force, say), appended as given.
	Extra []Check
	// HostAccess is the policy's host-access opt-in: a host firewall that cannot be applied
	// is then only a warning.
	HostAccess bool
}

// Status is a check's verdict.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one line of a doctor report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func (c Check) String() string {
	s := fmt.Sprintf("[%s] %s: %s", c.Status, c.Name, c.Detail)
	if c.Fix != "" && c.Status != Pass {
		s += " (fix: " + c.Fix + ")"
	}
	return s
}

// Report is the outcome of Doctor.
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}
