package lifecycle

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	buildctx "github.com/docker/cli/cli/command/image/build"
	"github.com/docker/docker/api/types/build"
	"github.com/moby/go-archive"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// BuildOptions configures Build.
type BuildOptions struct {
	// Tag is the reference the image gets: a content-hash tag, so that an existing one means
	// the same content was built before.
	Tag string
	// Labels are added to the image.
	Labels map[string]string
	// Limit, when set, bounds concurrent builds: it is called just before a build really runs
	// (not when the tag exists, nor when the call shares another caller's build of the tag),
	// and the build's turn ends when the returned release is called.
	Limit func(ctx context.Context) (release func(), err error)
	// HostAccess runs the build's RUN steps on the engine's default bridge, which reaches the
	// host's own addresses (the policy's host-access). Without it a build that names no network
	// (or the default one) runs on BuildNetwork, which the host firewall keeps off the host.
	HostAccess bool
}

// Build builds svc's image as opts.Tag unless an image with that tag exists. Concurrent calls
// for one tag share one build. It reports whether a build ran.
//
// Builds use the engine's classic builder through the Engine API, as compose does with
// DOCKER_BUILDKIT=0: the library's BuildKit path writes progress straight to os.Stdout and
// wants the buildx plugin. BuildKit-only build features are rejected with ErrInvalidConfig.
func (e *Engine) Build(ctx context.Context, svc types.ServiceConfig, opts BuildOptions) (bool, error) {
	if svc.Build == nil {
		return false, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("build service %s: it has no build section", svc.Name))
	}
	if err := classicBuildable(svc); err != nil {
		return false, err
	}
	return e.images.EnsureTag(ctx, opts.Tag, func(ctx context.Context) error {
		if opts.Limit != nil {
			release, err := opts.Limit(ctx)
			if err != nil {
				return fmt.Errorf("build service %s: %w", svc.Name, err)
			}
			defer release()
		}
		return e.buildClassic(ctx, svc, opts)
	})
}

func classicBuildable(svc types.ServiceConfig) error {
	b := svc.Build
	var unsupported []string
	if len(b.Platforms) > 1 {
		unsupported = append(unsupported, "build.platforms")
	}
	if b.Privileged {
		unsupported = append(unsupported, "build.privileged")
	}
	if len(b.AdditionalContexts) > 0 {
		unsupported = append(unsupported, "build.additional_contexts")
	}
	if len(b.SSH) > 0 {
		unsupported = append(unsupported, "build.ssh")
	}
	if len(b.Secrets) > 0 {
		unsupported = append(unsupported, "build.secrets")
	}
	if len(unsupported) > 0 {
		return errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("build service %s: %s need BuildKit, which composebox does not use",
			svc.Name, strings.Join(unsupported, ", ")))
	}
	return nil
}

func (e *Engine) buildClassic(ctx context.Context, svc types.ServiceConfig, opts BuildOptions) error {
	b := svc.Build
	dockerfile := b.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(b.Context, dockerfile)
	}
	var body io.ReadCloser
	var rel string
	if b.DockerfileInline != "" {
		tarball, err := imagespec.Spec{Dockerfile: b.DockerfileInline}.Context()
		if err != nil {
			return err
		}
		body, rel = io.NopCloser(strings.NewReader(string(tarball))), "Dockerfile"
	} else {
		dir, r, err := buildctx.GetContextFromLocalDir(b.Context, dockerfile)
		if err != nil {
			return errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("build service %s: prepare context %s", svc.Name, b.Context))
		}
		excludes, err := buildctx.ReadDockerignore(dir)
		if err != nil {
			return fmt.Errorf("build service %s: read .dockerignore: %w", svc.Name, err)
		}
		if err := buildctx.ValidateContextDirectory(dir, excludes); err != nil {
			return errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("build service %s: check context", svc.Name))
		}
		rel = filepath.ToSlash(r)
		excludes = buildctx.TrimBuildFilesFromExcludes(excludes, rel, false)
		tarball, err := archive.TarWithOptions(dir, &archive.TarOptions{ExcludePatterns: excludes, ChownOpts: &archive.ChownOpts{UID: 0, GID: 0}})
		if err != nil {
			return fmt.Errorf("build service %s: archive context: %w", svc.Name, err)
		}
		body = tarball
		if strings.HasPrefix(rel, "../") {
			// The Dockerfile lies outside the context: send it inside the archive.
			df, err := os.Open(dockerfile)
			if err != nil {
				return errdefs.Wrap(errdefs.ErrInvalidConfig, err, fmt.Sprintf("build service %s: open dockerfile", svc.Name))
			}
			defer df.Close()
			if body, rel, err = buildctx.AddDockerfileToBuildContext(df, body); err != nil {
				return fmt.Errorf("build service %s: %w", svc.Name, err)
			}
		}
	}
	defer body.Close()
	netMode := b.Network
	if m := strings.ToLower(strings.TrimSpace(netMode)); !opts.HostAccess && (m == "" || m == "default" || m == "bridge") {
		n, err := e.buildNetwork(ctx)
		if err != nil {
			return fmt.Errorf("build service %s: %w", svc.Name, err)
		}
		netMode = n
	}
	labels := map[string]string{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	err := images.Stream(ctx, e.api, body, build.ImageBuildOptions{
		Tags:        []string{opts.Tag},
		Dockerfile:  rel,
		BuildArgs:   b.Args,
		Labels:      labels,
		Target:      b.Target,
		NoCache:     b.NoCache,
		NetworkMode: netMode,
		ExtraHosts:  b.ExtraHosts.AsList(":"),
		ShmSize:     int64(b.ShmSize),
	})
	if err != nil {
		return fmt.Errorf("build service %s: %w", svc.Name, err)
	}
	return nil
}
