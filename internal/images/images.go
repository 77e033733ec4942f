// Package images builds the images composebox itself needs (described by package imagespec),
// locally and FROM scratch, because no registry can be assumed reachable. Images are tagged by a
// hash of their build context, so a build is skipped whenever an image with that content
// already exists.
package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/jsonmessage"

	cbxerr "github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// Builder builds specs through the Engine API. It is safe for concurrent use: concurrent Ensure
// calls for one tag share a single build.
type Builder struct {
	client  client.APIClient
	mu      sync.Mutex
	flights map[string]*flight
	builds  atomic.Int64
	// buildTimeout bounds one build: builds run detached from their callers' contexts.
	buildTimeout time.Duration
}

// flight is one build of a tag, shared by every caller that wants the tag while it runs.
type flight struct {
	done    chan struct{}
	cancel  context.CancelFunc
	waiters int // callers still waiting; guarded by Builder.mu
	built   bool
	err     error
}

// NewBuilder returns a Builder using c. It does not take ownership of c.
func NewBuilder(c client.APIClient) *Builder {
	return &Builder{client: c, flights: map[string]*flight{}, buildTimeout: 10 * time.Minute}
}

// Builds counts the builds this Builder actually ran (skipped ones excluded).
func (b *Builder) Builds() int64 { return b.builds.Load() }

// Ensure makes sure the image for spec exists and returns its tag. built reports whether this
// call's group ran a build.
func (b *Builder) Ensure(ctx context.Context, spec imagespec.Spec) (ref string, built bool, err error) {
	ref = spec.Tag()
	built, err = b.EnsureTag(ctx, ref, func(ctx context.Context) error {
		tarball, err := spec.Context()
		if err != nil {
			return err
		}
		return Stream(ctx, b.client, bytes.NewReader(tarball), build.ImageBuildOptions{
			Tags:       []string{ref},
			Labels:     spec.Labels,
			Dockerfile: "Dockerfile",
		})
	})
	return ref, built, err
}

// EnsureTag makes sure an image tagged tag exists, calling build when it does not. Concurrent
// calls for one tag share a single build, which runs detached from any one caller's context so
// that the others are not failed by the first caller's cancellation. When every caller has
// given up, the build is cancelled: a signal or a cancelled ctx stops it, and Stream removes
// what it had made. built reports whether a build ran.
func (b *Builder) EnsureTag(ctx context.Context, tag string, build func(context.Context) error) (built bool, err error) {
	b.mu.Lock()
	f, ok := b.flights[tag]
	if !ok {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.buildTimeout)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		b.flights[tag] = f
		go func() {
			defer cancel()
			f.built, f.err = b.ensure(bctx, tag, build)
			b.mu.Lock()
			if b.flights[tag] == f {
				delete(b.flights, tag)
			}
			b.mu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	b.mu.Unlock()
	select {
	case <-f.done:
		return f.built, f.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	f.waiters--
	last := f.waiters == 0
	if last && b.flights[tag] == f {
		delete(b.flights, tag) // a later caller starts afresh rather than joining a cancelled build
	}
	b.mu.Unlock()
	if last {
		f.cancel()
		// Give the build a moment to stop and remove what it made, so that a caller that
		// returns on cancellation does not leave the engine busy behind it.
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-f.done:
		case <-t.C:
		}
	}
	return false, fmt.Errorf("build image %s: %w", tag, ctx.Err())
}

// cancelGrace is how long the last caller to give up on a build waits for it to wind down.
const cancelGrace = 1500 * time.Millisecond

func (b *Builder) ensure(ctx context.Context, tag string, build func(context.Context) error) (bool, error) {
	if _, err := b.client.ImageInspect(ctx, tag); err == nil {
		return false, nil
	} else if !errdefs.IsNotFound(err) {
		return false, fmt.Errorf("inspect image %s: %w", tag, err)
	}
	if err := build(ctx); err != nil {
		return false, err
	}
	b.builds.Add(1)
	return true, nil
}

// Stream sends a build context to the engine's classic builder and waits for the build to
// finish. Intermediate containers are always removed. A build that fails at a step is a
// *errdefs.BuildError naming the step, with the tail of the build log; a failed or cancelled
// build also removes the images its steps had committed, so that it leaves nothing behind.
func Stream(ctx context.Context, c client.APIClient, body io.Reader, opts build.ImageBuildOptions) error {
	opts.Version = build.BuilderV1
	opts.Remove, opts.ForceRemove = true, true
	ref := strings.Join(opts.Tags, ", ")
	resp, err := c.ImageBuild(ctx, body, opts)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("build image %s: %w", ref, ctx.Err())
		}
		return fmt.Errorf("build image %s: %w", ref, err)
	}
	defer resp.Body.Close()
	var log buildLog
	err = jsonmessage.DisplayJSONMessagesStream(resp.Body, &log, 0, false, nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	resp.Body.Close() // a cancelled build stops on the daemon's side once its client has gone
	removeImages(ctx, c, log.created(), log.inflight())
	var jerr *jsonmessage.JSONError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("build image %s: %w", ref, ctx.Err())
	case errors.As(err, &jerr):
		return &cbxerr.BuildError{Image: ref, Step: log.step, Message: jerr.Message, Log: tail(log.text.String(), 2000)}
	}
	return fmt.Errorf("build image %s: %w", ref, err)
}

// buildLog is the text of a classic build's output, read line by line for the steps it
// announces ("Step 2/5 : RUN make") and the image each finished step committed (" ---> id").
type buildLog struct {
	text    bytes.Buffer
	partial []byte
	step    string
	// steps are the finished steps that committed an image of this build's own: not a FROM
	// (its image is the base), not a step the cache answered.
	steps []string
	// result is the image the current step ended with, if it has ended; cached marks a step
	// answered from the cache.
	result   string
	cached   bool
	fromStep bool
	// running is the container the current step runs in (" ---> Running in id"), and last
	// the image the previous step ended with: the parent of what the current step commits.
	running string
	last    string
}

var (
	reStep   = regexp.MustCompile(`^Step \d+/\d+ : (.*)$`)
	reResult = regexp.MustCompile(`^ ---> ([0-9a-f]{12,64})$`)
	reRunIn  = regexp.MustCompile(`^ ---> Running in ([0-9a-f]{12,64})$`)
)

func (l *buildLog) Write(p []byte) (int, error) {
	l.text.Write(p)
	if l.text.Len() > 1<<20 {
		// Keep the tail only: the log is for the error message.
		rest := bytes.Clone(l.text.Bytes()[l.text.Len()-64<<10:])
		l.text.Reset()
		l.text.Write(rest)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.line(strings.TrimRight(string(l.partial[:i]), "\r"))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 {
		l.partial = l.partial[:0] // a line this long is a step's output, not the builder's
	}
	return len(p), nil
}

func (l *buildLog) line(s string) {
	if m := reStep.FindStringSubmatch(s); m != nil {
		l.endStep()
		l.step = s
		l.fromStep = len(m[1]) >= 5 && strings.EqualFold(m[1][:5], "FROM ")
		return
	}
	if s == " ---> Using cache" {
		l.cached = true
		return
	}
	if m := reRunIn.FindStringSubmatch(s); m != nil && l.running == "" {
		l.running = m[1] // the builder's line comes first in a step, before any output
		return
	}
	if m := reResult.FindStringSubmatch(s); m != nil {
		// A RUN step's own output can print such a line too; the builder's comes last, just
		// before the next step, so only the last one of a step counts.
		l.result = m[1]
	}
}

// endStep records the step that just finished. The step a build fails in never finishes: a
// result seen in it can only be the step's own output.
func (l *buildLog) endStep() {
	if l.step != "" && l.result != "" && !l.cached && !l.fromStep {
		l.steps = append(l.steps, l.result)
	}
	if l.result != "" {
		l.last = l.result
	}
	l.result, l.cached, l.fromStep, l.running = "", false, false, ""
}

// inflightStep is the step a build stopped in: the container it ran in and the image it
// started from. A build cancelled while the daemon commits that step's image ends with an
// image that the log never names.
type inflightStep struct{ container, parent string }

func (l *buildLog) inflight() inflightStep {
	if l.running == "" || l.last == "" {
		return inflightStep{}
	}
	return inflightStep{container: l.running, parent: l.last}
}

// created lists the images the build's finished steps committed, newest first.
func (l *buildLog) created() []string {
	out := slices.Clone(l.steps)
	slices.Reverse(out)
	return out
}

// removeImages removes the images a failed build committed, newest first. Each is checked
// first: an image that has a tag is not a leftover (whatever the log said), and one that
// has children is in use. The step the build stopped in may still commit an image once its
// container is done: that image is found by the container it came from, and removed too.
func removeImages(ctx context.Context, c client.APIClient, ids []string, step inflightStep) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if step.container != "" {
		if id := stepImage(dctx, c, step); id != "" {
			ids = append([]string{id}, ids...)
		}
	}
	for _, id := range ids {
		img, err := c.ImageInspect(dctx, id)
		if err != nil || tagged(img.RepoTags) {
			continue
		}
		// A cancelled build's step container still holds its image until the daemon has
		// stopped and removed it: retry while the image is in use.
		for {
			_, err := c.ImageRemove(dctx, img.ID, image.RemoveOptions{PruneChildren: false})
			if err == nil || !errdefs.IsConflict(err) {
				break
			}
			if !sleepCtx(dctx, 200*time.Millisecond) {
				return
			}
		}
	}
}

// stepImage waits for the step's container to go (the daemon removes it once the step has
// ended, committed or not) and returns the image committed from it, if any.
func stepImage(ctx context.Context, c client.APIClient, step inflightStep) string {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if _, err := c.ContainerInspect(wctx, step.container); errdefs.IsNotFound(err) {
			break
		}
		if !sleepCtx(wctx, 100*time.Millisecond) {
			break
		}
	}
	parent, err := c.ImageInspect(ctx, step.parent)
	if err != nil {
		return ""
	}
	list, err := c.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("since", parent.ID))})
	if err != nil {
		return ""
	}
	for _, im := range list {
		if im.ParentID != parent.ID || tagged(im.RepoTags) {
			continue
		}
		if in, err := c.ImageInspect(ctx, im.ID); err == nil && strings.HasPrefix(in.Container, step.container) {
			return im.ID
		}
	}
	return ""
}

// tagged reports whether an image has a tag; engines before API 1.43 list an untagged one as
// "<none>:<none>".
func tagged(tags []string) bool {
	for _, t := range tags {
		if t != "<none>:<none>" {
			return true
		}
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Base makes sure the base image built from DefaultBusybox exists and returns its reference.
func (b *Builder) Base(ctx context.Context) (string, error) {
	s, err := imagespec.BaseSpec(imagespec.DefaultBusybox)
	if err != nil {
		return "", err
	}
	ref, _, err := b.Ensure(ctx, s)
	return ref, err
}
