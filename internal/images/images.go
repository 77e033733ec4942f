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
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/jsonmessage"
	"golang.org/x/sync/singleflight"

	"github.com/composebox/composebox/internal/images/imagespec"
)

// Builder builds specs through the Engine API. It is safe for concurrent use: concurrent Ensure
// calls for one tag share a single build.
type Builder struct {
	client client.APIClient
	group  singleflight.Group
	builds atomic.Int64
	// buildTimeout bounds one build: builds run detached from their callers' contexts.
	buildTimeout time.Duration
}

// NewBuilder returns a Builder using c. It does not take ownership of c.
func NewBuilder(c client.APIClient) *Builder {
	return &Builder{client: c, buildTimeout: 10 * time.Minute}
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
// that the others are not failed by the first caller's cancellation. built reports whether a
// build ran.
func (b *Builder) EnsureTag(ctx context.Context, tag string, build func(context.Context) error) (built bool, err error) {
	ch := b.group.DoChan(tag, func() (any, error) {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.buildTimeout)
		defer cancel()
		if _, err := b.client.ImageInspect(bctx, tag); err == nil {
			return false, nil
		} else if !errdefs.IsNotFound(err) {
			return false, fmt.Errorf("inspect image %s: %w", tag, err)
		}
		if err := build(bctx); err != nil {
			return false, err
		}
		b.builds.Add(1)
		return true, nil
	})
	select {
	case <-ctx.Done():
		return false, fmt.Errorf("build image %s: %w", tag, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return false, r.Err
		}
		return r.Val.(bool), nil
	}
}

// Stream sends a build context to the engine's classic builder and waits for the build to
// finish. Intermediate containers are always removed. A failing step is reported with the tail
// of the build log.
func Stream(ctx context.Context, c client.APIClient, body io.Reader, opts build.ImageBuildOptions) error {
	opts.Version = build.BuilderV1
	opts.Remove, opts.ForceRemove = true, true
	ref := strings.Join(opts.Tags, ", ")
	resp, err := c.ImageBuild(ctx, body, opts)
	if err != nil {
		return fmt.Errorf("build image %s: %w", ref, err)
	}
	defer resp.Body.Close()
	var log bytes.Buffer
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, &log, 0, false, nil); err != nil {
		var jerr *jsonmessage.JSONError
		if errors.As(err, &jerr) {
			return fmt.Errorf("build image %s: %s (build log: %s)", ref, jerr.Message, tail(log.String(), 2000))
		}
		return fmt.Errorf("build image %s: %w", ref, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
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
