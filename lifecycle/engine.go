// Package lifecycle drives compose projects through build, up, wait and down. It is the only
// package that imports the compose library (github.com/docker/compose/v2), so that moving to a
// later compose major version touches this package alone. Exec and file I/O go straight to the
// Engine API.
package lifecycle

import (
	"bytes"

	"io"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/flags"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/compose/v2/pkg/compose"
	"github.com/docker/compose/v2/pkg/progress"
	"github.com/docker/docker/client"
	"github.com/sirupsen/logrus"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/internal/images"
	"github.com/composebox/composebox/internal/subnets"
)

// Engine is one embedded compose service bound to one Engine API client. It is safe for
// concurrent use. It does not own the client: Close leaves it open.
type Engine struct {
	api     client.APIClient
	cli     *command.DockerCli
	compose api.Compose
	images  *images.Builder
	log     *slog.Logger
	// retry is how lifecycle calls through api ride out daemon hiccups (see Retrying).
	retry   RetryPolicy
	subnets Subnets
	pool    subnets.Pool
	alloc   allocator
	// fw keeps sample networks and builds off the host's own addresses.
	fw *hostfw.Firewall
	// out is compose's own output stream: its progress lines go to the Up in flight for their
	// project, so that nothing reaches the process's stdout or stderr.
	out progressSink
	// egressBinary is the composebox binary the egress gateway's image holds (WithEgressBinary).
	egressBinary string
}

// Option configures an Engine.
type Option func(*Engine)

// WithLogger sends the engine's diagnostics to l (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

var globalsOnce sync.Once

// setGlobals sets the compose library's process-wide switches once: progress as JSON lines,
// which only ever reach the engine's progressSink, and its logrus warnings away from stderr.
// cmd/ may re-point logrus afterwards.
func setGlobals() {
	globalsOnce.Do(func() {
		progress.Mode = progress.ModeJSON
		logrus.SetOutput(io.Discard)
	})
}

// New returns an Engine over c. The DockerCli it builds for compose is pinned to c's host, so
// that compose never resolves a docker context itself (a missing one makes the CLI exit the
// process).
func New(c client.APIClient, opts ...Option) (*Engine, error) {
	setGlobals()
	e := &Engine{api: c, images: images.NewBuilder(c), log: slog.New(slog.DiscardHandler), fw: hostfw.New()}
	for _, o := range opts {
		o(e)
	}
	pool, err := subnets.Configured(e.subnets.Pool, e.subnets.Bits)
	if err != nil && !e.subnets.Disabled {
		return nil, cbxerr.Wrap(cbxerr.ErrInvalidConfig, err, "new engine")
	}
	e.pool = pool
	// Everything the engine does, compose's own calls and teardown included, goes through the
	// retrying client; exec and copies pass through it untouched.
	e.api = Retrying(c, e.retry, e.log)
	e.images = images.NewBuilder(e.api)
	cli, err := command.NewDockerCli(
		command.WithAPIClient(e.api),
		command.WithInputStream(io.NopCloser(bytes.NewReader(nil))),
		command.WithOutputStream(&e.out),
		command.WithErrorStream(&e.out),
	)
	if err != nil {
		return nil, err
	}
	level := logrus.GetLevel()
	err = cli.Initialize(&flags.ClientOptions{Hosts: []string{c.DaemonHost()}})
	logrus.SetLevel(level) // Initialize resets the global level to info
	if err != nil {
		return nil, err
	}
	e.cli = cli
	e.compose = compose.NewComposeService(cli, compose.WithPrompt(func(string, bool) (bool, error) {
		// Never interactive: answer "no" to anything compose would ask a person.
		return false, nil
	}))
	return e, nil
}

// Client is the Engine API client the engine uses.
func (e *Engine) Client() client.APIClient { return e.api }

// Images is the engine's image builder: one build per tag across everything using this engine.
func (e *Engine) Images() *images.Builder { return e.images }

// Close releases the engine. The client passed to New stays open.
func (e *Engine) Close() error { return nil }

// Output is the tail of what the compose library wrote to its streams other than progress
// lines, for diagnostics.
func (e *Engine) Output() string { return e.out.rest.String() }

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Keep the tail only: compose can be chatty on long runs.
	if b.buf.Len() > 1<<20 {
		b.buf.Next(b.buf.Len() - 1<<19)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ComposeVersion is the version of the embedded compose library.
func ComposeVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/docker/compose/v2" {
			return d.Version
		}
	}
	return "unknown"
}

// Subnets is the managed-subnet configuration the engine was made with.
func (e *Engine) Subnets() Subnets { return e.subnets }
