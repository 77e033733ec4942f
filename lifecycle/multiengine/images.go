package multiengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Images go where samples go. A task's builds are recorded when TaskInit asks for them and
// run on the first engine that answers; each other engine that gets a sample of the task runs
// the same build, under the same content tag, the first time (builds and transfers are one at
// a time per engine and reference). An image a task only names, composebox's base image
// among them, is streamed from an engine that has it: SaveImages writes into a pipe that
// LoadImages reads, so no archive of the whole image is ever held on disk or in memory.

// buildRecord is one build TaskInit asked for, to run again on other engines.
type buildRecord struct {
	svc  types.ServiceConfig
	opts backend.BuildOptions

	// from are the images the Dockerfile starts from or copies out of, read once.
	fromOnce sync.Once
	from     []string
	fromErr  error
}

// home is the engine where a task's images are first made: the first, in the order given,
// that is not known to be down.
func (b *Backend) home() *member {
	for _, m := range b.members {
		if !m.isDown() {
			return m
		}
	}
	return b.members[0]
}

// BaseImage makes composebox's base image on the home engine; other engines receive it from
// there when a sample that runs it lands on them.
func (b *Backend) BaseImage(ctx context.Context) (string, error) {
	m := b.home()
	ref, err := m.b.BaseImage(ctx)
	if err != nil {
		return "", m.wrap(err)
	}
	m.hasImage(ref, true)
	b.mu.Lock()
	b.baseRef = ref
	b.mu.Unlock()
	return ref, nil
}

// Image describes ref as the first engine that has it does; ErrNotFound when none has it.
func (b *Backend) Image(ctx context.Context, ref string) (backend.ImageInfo, error) {
	var firstErr error
	for _, m := range b.members {
		if m.ready(ctx) != nil {
			continue
		}
		info, err := m.image(ctx, ref)
		switch {
		case err == nil:
			return info, nil
		case errdefs.Kind(err) != "not_found" && firstErr == nil:
			firstErr = m.wrap(err)
		}
	}
	if firstErr != nil && errdefs.Kind(firstErr) != "internal" {
		return backend.ImageInfo{}, firstErr
	}
	return backend.ImageInfo{}, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("image %s: on no engine", ref))
}

// Build records the build, and runs it on the home engine.
func (b *Backend) Build(ctx context.Context, svc types.ServiceConfig, opts backend.BuildOptions) (bool, error) {
	b.mu.Lock()
	if _, ok := b.builds[opts.Tag]; !ok {
		b.builds[opts.Tag] = &buildRecord{svc: svc, opts: opts}
	}
	b.mu.Unlock()
	m := b.home()
	built, err := m.b.Build(ctx, svc, opts)
	if err != nil {
		return false, m.wrap(err)
	}
	m.hasImage(opts.Tag, true)
	return built, nil
}

// ensureImages makes every one of refs present on m.
func (b *Backend) ensureImages(ctx context.Context, m *member, refs []string) error {
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() { errs[i] = b.ensureImage(ctx, m, ref) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ensureImage makes ref present on m: present already, built there (a recorded build), or
// streamed from an engine that has it. Concurrent calls for one engine and reference share
// one transfer or build; a caller whose own ctx is alive does not inherit another's
// cancellation.
func (b *Backend) ensureImage(ctx context.Context, m *member, ref string) error {
	for {
		if present, _ := m.knowsImage(ref); present {
			return nil
		}
		_, err, _ := b.flights.Do(m.name+"\x00"+ref, func() (any, error) { return nil, b.bringImage(ctx, m, ref) })
		if err != nil && errors.Is(err, context.Canceled) && ctx.Err() == nil {
			continue // the caller that led the flight gave up; lead another
		}
		return err
	}
}

// bringImage is one ensureImage flight.
func (b *Backend) bringImage(ctx context.Context, m *member, ref string) error {
	_, err := m.image(ctx, ref)
	switch {
	case err == nil:
		return nil
	case errdefs.Kind(err) != "not_found":
		return err
	}
	b.mu.Lock()
	rec := b.builds[ref]
	base := b.baseRef
	b.mu.Unlock()
	if rec != nil {
		return b.buildOn(ctx, m, rec)
	}
	src, err := b.source(ctx, ref, m)
	switch {
	case err != nil:
		return err
	case src != nil:
		return b.stream(ctx, src, m, ref)
	case ref == base:
		// Nowhere to copy it from: the engine makes its own.
		if _, err := m.b.BaseImage(ctx); err != nil {
			return err
		}
		m.hasImage(ref, true)
		return nil
	}
	return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("image %s is on no engine that answers, and composebox never pulls: build it or `docker load` it on one of them", ref))
}

// buildOn runs a recorded build on m, once the images it starts from are there.
func (b *Backend) buildOn(ctx context.Context, m *member, rec *buildRecord) error {
	rec.fromOnce.Do(func() { rec.from, rec.fromErr = buildSources(ctx, rec) })
	if rec.fromErr != nil {
		return rec.fromErr
	}
	if err := b.ensureImages(ctx, m, rec.from); err != nil {
		return fmt.Errorf("build service %s: %w", rec.svc.Name, err)
	}
	if _, err := m.b.Build(ctx, rec.svc, rec.opts); err != nil {
		return err
	}
	m.hasImage(rec.opts.Tag, true)
	return nil
}

// buildSources are the images a build starts from or copies out of, as its Dockerfile names
// them.
func buildSources(ctx context.Context, rec *buildRecord) ([]string, error) {
	if rec.svc.Build == nil {
		return nil, nil
	}
	in, err := compose.ReadBuildInput(ctx, rec.svc.Build, rec.opts.Roots)
	if err != nil {
		return nil, fmt.Errorf("build service %s: %w", rec.svc.Name, err)
	}
	args := map[string]string{}
	for k, v := range rec.svc.Build.Args {
		if v != nil {
			args[k] = *v
		}
	}
	src, err := compose.ParseDockerfile(in.Dockerfile, args, rec.svc.Build.Target)
	if err != nil {
		return nil, fmt.Errorf("build service %s: %w", rec.svc.Name, err)
	}
	var refs []string
	for _, im := range src.Images {
		if !slices.Contains(refs, im.Ref) {
			refs = append(refs, im.Ref)
		}
	}
	return refs, nil
}

// source is an engine other than dst that has ref, nil when none that answers has it.
func (b *Backend) source(ctx context.Context, ref string, dst *member) (*member, error) {
	// Those known to have it first, then the others, each in the order given.
	var known, unknown []*member
	for _, m := range b.members {
		if m == dst || m.ready(ctx) != nil {
			continue
		}
		switch present, seen := m.knowsImage(ref); {
		case present:
			known = append(known, m)
		case !seen:
			unknown = append(unknown, m)
		}
	}
	if len(known) > 0 {
		return known[0], nil
	}
	for _, m := range unknown {
		if _, err := m.image(ctx, ref); err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, nil
}

// stream copies ref from src to dst: src's SaveImages writes into a pipe that dst's LoadImages
// reads. Whichever side fails first stops the other.
func (b *Backend) stream(ctx context.Context, src, dst *member, ref string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	saved := make(chan error, 1)
	from, err := optional[backend.ImageMover](src, "copy image "+ref, "backend.ImageMover")
	if err != nil {
		return err
	}
	to, err := optional[backend.ImageMover](dst, "copy image "+ref, "backend.ImageMover")
	if err != nil {
		return err
	}
	go func() {
		err := from.SaveImages(ctx, []string{ref}, pw)
		pw.CloseWithError(err) // nil: EOF for the loader
		saved <- err
	}()
	lerr := to.LoadImages(ctx, pr)
	if lerr != nil {
		cancel()
	}
	pr.CloseWithError(errors.New("the loading engine stopped reading"))
	serr := <-saved
	if serr != nil {
		return fmt.Errorf("copy image %s from engine %s: %w", ref, src.name, src.wrap(serr))
	}
	if lerr != nil {
		return fmt.Errorf("copy image %s from engine %s: load: %w", ref, src.name, lerr)
	}
	if _, err := dst.b.Image(ctx, ref); err != nil {
		return fmt.Errorf("copy image %s from engine %s: not there after the load: %w", ref, src.name, err)
	}
	dst.hasImage(ref, true)
	b.log.Debug("image copied between engines", "image", ref, "from", src.name, "to", dst.name)
	return nil
}

// SaveImages saves refs from the first engine that has them all.
func (b *Backend) SaveImages(ctx context.Context, refs []string, w io.Writer) error {
	for _, m := range b.members {
		if m.ready(ctx) != nil {
			continue
		}
		all := true
		for _, r := range refs {
			if _, err := m.b.Image(ctx, r); err != nil {
				all = false
				break
			}
		}
		if x, ok := backend.AsImageMover(m.b); all && ok {
			return m.wrap(x.SaveImages(ctx, refs, w))
		}
	}
	return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("save images %v: no engine has them all", refs))
}

// LoadImages loads an archive into the home engine.
func (b *Backend) LoadImages(ctx context.Context, r io.Reader) error {
	m := b.home()
	x, err := optional[backend.ImageMover](m, "load images", "backend.ImageMover")
	if err != nil {
		return err
	}
	return m.wrap(x.LoadImages(ctx, r))
}

// ListImages lists the images of every engine whose labels match sel.
func (b *Backend) ListImages(ctx context.Context, sel []string) ([]backend.ImageInfo, error) {
	return gather(ctx, b, func(ctx context.Context, m *member) ([]backend.ImageInfo, error) {
		x, err := optional[backend.Pruner](m, "list images", "backend.Pruner")
		if err != nil {
			return nil, err
		}
		return x.ListImages(ctx, sel)
	}, nil)
}

// PruneImages prunes every engine's task images, and adds up the reports.
func (b *Backend) PruneImages(ctx context.Context, opts backend.PruneImagesOptions) (backend.ImageReport, error) {
	reps := make([]backend.ImageReport, len(b.members))
	err := b.each(ctx, func(ctx context.Context, i int, m *member) error {
		x, err := optional[backend.Pruner](m, "prune images", "backend.Pruner")
		if err != nil {
			return err
		}
		reps[i], err = x.PruneImages(ctx, opts)
		return err
	})
	out := backend.ImageReport{Removed: []backend.PrunedImage{}}
	for i, r := range reps {
		out.Removed = append(out.Removed, r.Removed...)
		out.Kept = append(out.Kept, r.Kept...)
		out.BytesReclaimed += r.BytesReclaimed
		if len(r.Removed) > 0 {
			// What was removed may be wanted again: ask the engine next time.
			m := b.members[i]
			m.mu.Lock()
			clear(m.images)
			m.mu.Unlock()
		}
	}
	return out, err
}
