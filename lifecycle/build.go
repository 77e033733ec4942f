package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	buildctx "github.com/docker/cli/cli/command/image/build"
	"github.com/docker/docker/api/types/build"
	cerrdefs "github.com/docker/docker/errdefs"
	"github.com/moby/go-archive"

	"github.com/composebox/composebox/compose"
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
	// Roots are the directories the build's files may come from (compose.Policy.TaskRoots);
	// empty means the build context and the Dockerfile's directory.
	Roots []string
	// AllowAddURL lets a Dockerfile ADD a URL (the add-url opt-in); one whose host is the
	// host's own, loopback, link-local or private stays denied.
	AllowAddURL bool
}

// Build builds svc's image as opts.Tag unless an image with that tag exists. Concurrent calls
// for one tag share one build. It reports whether a build ran.
//
// Builds use the engine's classic builder through the Engine API, as compose does with
// DOCKER_BUILDKIT=0: the library's BuildKit path writes progress straight to os.Stdout and
// wants the buildx plugin. BuildKit-only build features are rejected with ErrInvalidConfig.
//
// The daemon builds on the host's network and pulls what it lacks, so nothing reaches it
// unchecked. The task's files are read once, bounded and by type (compose.ReadBuildInput), and
// the Dockerfile that was checked is the one sent. Every image the Dockerfile starts from or
// copies out of must be present on the engine (a missing one is ErrNotFound naming it), so the
// daemon never pulls; ADD of a URL is a policy violation unless opts allow it. A step that
// fails is ErrBuildFailed (*errdefs.BuildError), and leaves no image behind.
func (e *Engine) Build(ctx context.Context, svc types.ServiceConfig, opts BuildOptions) (bool, error) {
	if svc.Build == nil {
		return false, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("build service %s: it has no build section", svc.Name))
	}
	if err := classicBuildable(svc); err != nil {
		return false, err
	}
	in, err := compose.ReadBuildInput(ctx, svc.Build, opts.Roots)
	if err != nil {
		return false, fmt.Errorf("build service %s: %w", svc.Name, err)
	}
	args := map[string]string{}
	for k, v := range svc.Build.Args {
		if v != nil {
			args[k] = *v
		}
	}
	src, err := compose.ParseDockerfile(in.Dockerfile, args, svc.Build.Target)
	if err != nil {
		return false, fmt.Errorf("build service %s: %w", svc.Name, err)
	}
	if err := (compose.Policy{AllowAddURL: opts.AllowAddURL}).CheckBuildSources(ctx, svc.Name, src, nil); err != nil {
		return false, err
	}
	return e.images.EnsureTag(ctx, opts.Tag, func(ctx context.Context) error {
		// Checked right before the build, so that an image removed since is not pulled.
		if err := e.requireBuildImages(ctx, svc.Name, src.Images); err != nil {
			return err
		}
		if opts.Limit != nil {
			release, err := opts.Limit(ctx)
			if err != nil {
				return fmt.Errorf("build service %s: %w", svc.Name, err)
			}
			defer release()
		}
		return e.buildClassic(ctx, svc, in, opts)
	})
}

// requireBuildImages checks that every image a build starts from is on the engine, for the
// platform the Dockerfile asks: the classic builder pulls one that is not, from wherever its
// name points.
func (e *Engine) requireBuildImages(ctx context.Context, service string, images []compose.DockerfileImage) error {
	for _, im := range images {
		where := fmt.Sprintf("build service %s: Dockerfile line %d: %s %s", service, im.Line, im.Instruction, im.Ref)
		inspect, err := e.api.ImageInspect(ctx, im.Ref)
		switch {
		case err == nil:
		case cerrdefs.IsNotFound(err):
			return errdefs.New(errdefs.ErrNotFound, where+": the image is not present on the engine, and composebox never lets a build pull (no registry is assumed): build it or `docker load` it first")
		case cerrdefs.IsInvalidParameter(err):
			return errdefs.Wrap(errdefs.ErrInvalidConfig, err, where)
		default:
			return fmt.Errorf("%s: inspect image: %w", where, err)
		}
		if im.Platform != "" && !platformMatches(im.Platform, inspect.Os, inspect.Architecture, inspect.Variant) {
			return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s: the image present is for %s/%s, not %s, and composebox never lets a build pull one",
				where, inspect.Os, inspect.Architecture, im.Platform))
		}
	}
	return nil
}

// platformMatches compares "os/arch[/variant]" with an image's platform.
func platformMatches(want, os, arch, variant string) bool {
	parts := strings.Split(strings.ToLower(want), "/")
	if len(parts) < 2 || parts[0] != strings.ToLower(os) || parts[1] != strings.ToLower(arch) {
		return false
	}
	return len(parts) < 3 || parts[2] == strings.ToLower(variant)
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

// buildClassic sends the build: the context as walked by ReadBuildInput, with the Dockerfile
// that was checked added under a name of its own (the one on disk could have changed since).
func (e *Engine) buildClassic(ctx context.Context, svc types.ServiceConfig, in *compose.BuildInput, opts BuildOptions) error {
	b := svc.Build
	var body io.ReadCloser
	var rel string
	if in.Context == "" {
		tarball, err := imagespec.Spec{Dockerfile: string(in.Dockerfile)}.Context()
		if err != nil {
			return err
		}
		body, rel = io.NopCloser(bytes.NewReader(tarball)), "Dockerfile"
	} else {
		excludes := in.Excludes
		if in.DockerfileName != "" {
			excludes = buildctx.TrimBuildFilesFromExcludes(excludes, in.DockerfileName, false)
		}
		tarball, err := archive.TarWithOptions(in.Context, &archive.TarOptions{ExcludePatterns: excludes, ChownOpts: &archive.ChownOpts{UID: 0, GID: 0}})
		if err != nil {
			return fmt.Errorf("build service %s: archive context: %w", svc.Name, err)
		}
		if body, rel, err = buildctx.AddDockerfileToBuildContext(io.NopCloser(bytes.NewReader(in.Dockerfile)), tarball); err != nil {
			tarball.Close()
			return fmt.Errorf("build service %s: %w", svc.Name, err)
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
