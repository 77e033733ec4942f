package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// pushed remembers the local images this process pushed (by registry reference and image id),
// so that each is pushed once.
var pushed sync.Map

// registryRef is where ref lives in the backend's registry: the same repository path and tag
// under the registry's host. A reference already in the registry is kept.
func (b *Backend) registryRef(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", errdefs.Wrap(errdefs.ErrInvalidConfig, err, "image "+ref)
	}
	if reference.Domain(named) == b.registry {
		return ref, nil
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	return b.registry + "/" + reference.Path(named) + ":" + tag, nil
}

// Image makes ref available to the cluster and describes it: an image of the local Docker
// Engine is pushed to the registry unless this process did so already; one only the registry
// has is used from there; one neither has is ErrNotFound, at once.
func (b *Backend) Image(ctx context.Context, ref string) (backend.ImageInfo, error) {
	target, err := b.registryRef(ref)
	if err != nil {
		return backend.ImageInfo{}, err
	}
	img, err := b.docker.ImageInspect(ctx, ref)
	switch {
	case client.IsErrNotFound(err):
		ok, herr := b.inRegistry(ctx, target)
		if herr != nil {
			return backend.ImageInfo{}, herr
		}
		if !ok {
			return backend.ImageInfo{}, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("image %s: neither in the registry (%s) nor on the local Docker Engine", ref, target))
		}
		return backend.ImageInfo{ID: target}, nil
	case err != nil:
		return backend.ImageInfo{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if err := b.push(ctx, ref, target, img.ID); err != nil {
		return backend.ImageInfo{}, err
	}
	info := backend.ImageInfo{ID: img.ID}
	if img.Config != nil {
		info.Labels = img.Config.Labels
	}
	return info, nil
}

// push tags the local image ref as target and pushes it, through the Engine API.
func (b *Backend) push(ctx context.Context, ref, target, id string) error {
	if v, ok := pushed.Load(target); ok && v == id {
		return nil
	}
	if err := b.docker.ImageTag(ctx, ref, target); err != nil {
		return fmt.Errorf("tag %s as %s: %w", ref, target, err)
	}
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{})
	if err != nil {
		return err
	}
	rc, err := b.docker.ImagePush(ctx, target, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		return errdefs.Wrap(errdefs.ErrUnavailable, err, "push "+target)
	}
	defer rc.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil); err != nil {
		return errdefs.Wrap(errdefs.ErrUnavailable, err, "push "+target)
	}
	pushed.Store(target, id)
	b.log.Debug("pushed image", "image", ref, "to", target)
	return nil
}

// inRegistry asks the registry (plain HTTP, as a local one serves) for target's manifest.
func (b *Backend) inRegistry(ctx context.Context, target string) (bool, error) {
	named, err := reference.ParseNormalizedNamed(target)
	if err != nil {
		return false, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "image "+target)
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+b.registry+"/v2/"+reference.Path(named)+"/manifests/"+tag, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", strings.Join([]string{"application/vnd.docker.distribution.manifest.v2+json",
		"application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
		"application/vnd.docker.distribution.manifest.list.v2+json"}, ", "))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, errdefs.Wrap(errdefs.ErrUnavailable, err, "registry "+b.registry)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("registry %s: HEAD %s: %s", b.registry, target, resp.Status))
}

func (b *Backend) registryPing(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.registry+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("registry %s: GET /v2/: %s", b.registry, resp.Status)
	}
	return nil
}

// BaseImage builds composebox's base image on the local Docker Engine and pushes it.
func (b *Backend) BaseImage(ctx context.Context) (string, error) {
	ref, err := b.images.BaseImage(ctx)
	if err != nil {
		return "", err
	}
	_, err = b.Image(ctx, ref)
	return ref, err
}

// Build builds svc's image on the local Docker Engine and pushes it under the same tag.
func (b *Backend) Build(ctx context.Context, svc types.ServiceConfig, opts backend.BuildOptions) (bool, error) {
	built, err := b.images.Build(ctx, svc, opts)
	if err != nil {
		return built, err
	}
	_, err = b.Image(ctx, opts.Tag)
	return built, err
}

// SaveImages is the local Docker Engine's.
func (b *Backend) SaveImages(ctx context.Context, refs []string, w io.Writer) error {
	return b.images.SaveImages(ctx, refs, w)
}

// LoadImages loads into the local Docker Engine; Image pushes what samples use.
func (b *Backend) LoadImages(ctx context.Context, r io.Reader) error {
	return b.images.LoadImages(ctx, r)
}

// ListImages lists nothing yet: the task images a cluster runs live in the registry, which
// composebox does not inventory.
func (b *Backend) ListImages(ctx context.Context, sel []string) ([]backend.ImageInfo, error) {
	return nil, nil
}

// PruneImages is for the Docker engine that builds them (`composebox cleanup --images` without
// --backend); the registry's copies are not pruned yet.
func (b *Backend) PruneImages(ctx context.Context, opts backend.PruneImagesOptions) (backend.ImageReport, error) {
	return backend.ImageReport{}, notSupported("cleanup --images (prune the local engine's with the Docker backend)")
}
