package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// LogsOptions selects and routes a container's logs, as `docker compose logs` does. The zero
// value writes nothing: set Stdout and Stderr (nil discards that stream).
type LogsOptions struct {
	// Services limits Orchestrator.Logs to these services (all when empty). Sandbox.Logs
	// ignores it.
	Services []string
	// Follow keeps streaming new output until ctx ends or the container stops.
	Follow bool
	// Tail shows only the last Tail lines when > 0; 0 shows all of them, and a negative value
	// none (with Follow: only what comes next).
	Tail int
	// Since shows only output written at or after it (zero: from the start).
	Since time.Time
	// Timestamps starts each line with the engine's RFC 3339 timestamp.
	Timestamps bool
	// Stdout and Stderr receive the container's two streams.
	Stdout, Stderr io.Writer
}

func (opts LogsOptions) backend() backend.LogsOptions {
	return backend.LogsOptions{Follow: opts.Follow, Tail: opts.Tail, Since: opts.Since, Timestamps: opts.Timestamps, Stdout: opts.Stdout, Stderr: opts.Stderr}
}

// Logs streams the service's container output (what its main process wrote) into
// opts.Stdout and opts.Stderr. With Follow it returns when ctx ends (nil) or the container
// stops. Logs of a stopped container can still be read; a removed one is ErrNotFound.
func (b *Sandbox) Logs(ctx context.Context, opts LogsOptions) error {
	return b.o.containerLogs(ctx, b.target.Container, b.service, opts)
}

// Logs streams the logs of a project's services, running or not, found from labels alone (a
// sample started by any process). With more than one service, each line starts with the
// service name, padded as `docker compose logs` pads it ("web  | ..."), and lines of
// different services never interleave mid-line. An unknown project or service is
// ErrNotFound, naming what exists.
func (o *Orchestrator) Logs(ctx context.Context, project string, opts LogsOptions) error {
	ctrs, err := o.projectContainers(ctx, project, "logs")
	if err != nil {
		return err
	}
	var shown []backend.Container
	known := map[string]bool{}
	for _, c := range ctrs {
		svc := c.Labels[labels.ComposeServiceLabel]
		known[svc] = true
		if len(opts.Services) == 0 || slices.Contains(opts.Services, svc) {
			shown = append(shown, c)
		}
	}
	for _, s := range opts.Services {
		if !known[s] {
			return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("logs %s: no service %q (services: %s)", project, s, strings.Join(sortedKeys(known), ", ")))
		}
	}
	prefix := len(shown) > 1
	width := 0
	for _, c := range shown {
		width = max(width, len(c.Labels[labels.ComposeServiceLabel]))
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range shown {
		svc := c.Labels[labels.ComposeServiceLabel]
		copts := opts
		if prefix {
			p := fmt.Sprintf("%-*s | ", width, svc)
			copts.Stdout = &prefixWriter{mu: &mu, w: opts.Stdout, prefix: p}
			copts.Stderr = &prefixWriter{mu: &mu, w: opts.Stderr, prefix: p}
		}
		g.Go(func() error {
			err := o.containerLogs(gctx, c.ID, svc, copts)
			if pw, ok := copts.Stdout.(*prefixWriter); ok {
				pw.flush()
				copts.Stderr.(*prefixWriter).flush()
			}
			return err
		})
	}
	return g.Wait()
}

// projectContainers lists a project's containers, running or not; none is ErrNotFound with
// the near names of existing projects.
func (o *Orchestrator) projectContainers(ctx context.Context, project, op string) ([]backend.Container, error) {
	list, err := o.backend.Containers(ctx, labels.ProjectSelector(project), true)
	if err != nil {
		return nil, o.engineLost(fmt.Errorf("%s %s: list containers: %w", op, project, err))
	}
	if len(list) == 0 {
		return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s %s: no composebox sample by that name%s (see `composebox ls`)", op, project, o.nearProjects(ctx, project)))
	}
	return list, nil
}

// containerLogs streams one container's logs.
func (o *Orchestrator) containerLogs(ctx context.Context, id, service string, opts LogsOptions) error {
	if err := o.backend.Logs(ctx, id, opts.backend()); err != nil && ctx.Err() == nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return errdefs.Wrap(errdefs.ErrNotFound, err, "logs of "+service)
		}
		return o.engineLost(fmt.Errorf("logs of %s: %w", service, err))
	}
	return nil
}

// prefixWriter starts each line with a prefix and writes whole lines only, under a lock shared
// by every service's writers, so that lines never interleave mid-line.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	part   []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if p.w == nil {
		return len(b), nil
	}
	n := len(b)
	p.part = append(p.part, b...)
	i := bytes.LastIndexByte(p.part, '\n')
	if i < 0 {
		if len(p.part) < 64<<10 {
			return n, nil
		}
		// A very long line without a newline: write it out rather than hold it.
		i = len(p.part) - 1
	}
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(p.part[:i+1], []byte("\n")) {
		if len(line) > 0 {
			out.WriteString(p.prefix)
			out.Write(line)
		}
	}
	p.part = append(p.part[:0], p.part[i+1:]...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return n, nil
}

// flush writes a last line that has no newline.
func (p *prefixWriter) flush() {
	if len(p.part) > 0 {
		_, _ = p.Write([]byte("\n"))
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
