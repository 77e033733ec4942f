package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

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
// has is used from there, described by its configuration in the registry (its labels say
// which task composebox built it for, as the local engine's copy would); one neither has is
// ErrNotFound, at once.
func (b *Backend) Image(ctx context.Context, ref string) (backend.ImageInfo, error) {
	target, err := b.registryRef(ref)
	if err != nil {
		return backend.ImageInfo{}, err
	}
	img, err := b.docker.ImageInspect(ctx, ref)
	switch {
	case client.IsErrNotFound(err):
		return b.registryImage(ctx, ref, target)
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

// registryImage describes target, an image only the registry has: the image configuration
// its manifest names (for an index, the manifest of the platform pods run on) gives its id
// and labels. Without them an image composebox built for another task and then removed from
// the local engine would come back unlabelled and pass as nobody's.
func (b *Backend) registryImage(ctx context.Context, ref, target string) (backend.ImageInfo, error) {
	named, err := reference.ParseNormalizedNamed(target)
	if err != nil {
		return backend.ImageInfo{}, errdefs.Wrap(errdefs.ErrInvalidConfig, err, "image "+target)
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	repo := reference.Path(named)
	var m manifestOrIndex
	found, err := b.registryGet(ctx, repo, "manifests/"+tag, &m)
	if err != nil || !found {
		if err == nil {
			err = errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("image %s: neither in the registry (%s) nor on the local Docker Engine", ref, target))
		}
		return backend.ImageInfo{}, err
	}
	if len(m.Manifests) > 0 {
		// An index: the manifest for the nodes' platform (linux, this architecture), else the
		// first.
		pick := m.Manifests[0]
		for _, d := range m.Manifests {
			if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
				pick = d
				break
			}
		}
		m = manifestOrIndex{}
		if found, err = b.registryGet(ctx, repo, "manifests/"+pick.Digest.String(), &m); err != nil || !found {
			return backend.ImageInfo{}, registryMissing(target, "manifest "+pick.Digest.String(), err)
		}
	}
	if m.Config.Digest == "" {
		return backend.ImageInfo{}, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("registry %s: image %s: its manifest names no configuration", b.registry, target))
	}
	var cfg ocispec.Image
	if found, err = b.registryGet(ctx, repo, "blobs/"+m.Config.Digest.String(), &cfg); err != nil || !found {
		return backend.ImageInfo{}, registryMissing(target, "configuration "+m.Config.Digest.String(), err)
	}
	return backend.ImageInfo{ID: m.Config.Digest.String(), Labels: cfg.Config.Labels}, nil
}

// manifestOrIndex is what a manifest request answers: an image manifest (its configuration)
// or an index (its manifests, by platform).
type manifestOrIndex struct {
	Config    ocispec.Descriptor   `json:"config"`
	Manifests []ocispec.Descriptor `json:"manifests"`
}

// registryMissing is err, or, when the registry answered 404 for what its own manifest names,
// ErrUnavailable saying so.
func registryMissing(target, what string, err error) error {
	if err != nil {
		return err
	}
	return errdefs.New(errdefs.ErrUnavailable, "image "+target+": the registry lacks its "+what)
}

// manifestTypes are the manifests and indexes a registry may answer with.
var manifestTypes = strings.Join([]string{ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex,
	"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.docker.distribution.manifest.list.v2+json"}, ", ")

// registryMaxDocument bounds a manifest or an image configuration read from the registry.
const registryMaxDocument = 4 << 20

// registryGet reads the JSON document at /v2/<repo>/<path> of the registry (plain HTTP, as a
// local one serves) into v; a 404 is found false.
func (b *Backend) registryGet(ctx context.Context, repo, path string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.registry+"/v2/"+repo+"/"+path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", manifestTypes)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, errdefs.Wrap(errdefs.ErrUnavailable, err, "registry "+b.registry)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return false, nil
	default:
		return false, errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("registry %s: GET %s/%s: %s", b.registry, repo, path, resp.Status))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, registryMaxDocument)).Decode(v); err != nil {
		return false, errdefs.Wrap(errdefs.ErrUnavailable, err, fmt.Sprintf("registry %s: read %s/%s", b.registry, repo, path))
	}
	return true, nil
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

// baseRef is composebox's base image in the registry (built and pushed if need be), which
// composebox's own containers in a pod run: gates, bind delivery, volume removal.
func (b *Backend) baseRef(ctx context.Context) (string, error) {
	base, err := b.BaseImage(ctx)
	if err != nil {
		return "", err
	}
	return b.registryRef(base)
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
