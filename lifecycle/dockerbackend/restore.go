package dockerbackend

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Restore points each service of target that st recorded at the recorded image, through a tag
// of target's own (cleanup.StateRepo), and gives each named volume st recorded a fresh copy of
// its content. The target's containers must not exist: its volumes are made anew.
func (b *Backend) Restore(ctx context.Context, st backend.State, target *types.Project) error {
	op := fmt.Sprintf("restore %s of %s into %s", st.Name, st.Project, target.Name)
	c := b.raw
	// The volumes first: they carry the project's labels, so that a process that dies before
	// the tags below still leaves its project findable by them.
	if err := b.restoreVolumes(ctx, op, st, target); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(target.Services)) {
		src, ok := st.Images[name]
		if !ok {
			continue
		}
		svc := target.Services[name]
		ref := fmt.Sprintf("%s:run.%s", cleanup.StateRepo(target.Name), name)
		// A reset replaces the tag of the state the project ran before; its image goes with it
		// unless another project or state still tags it.
		if _, err := c.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !client.IsErrNotFound(err) {
			return fmt.Errorf("%s: untag %s: %w", op, ref, err)
		}
		if err := c.ImageTag(ctx, src, ref); err != nil {
			return fmt.Errorf("%s: tag %s: %w", op, name, err)
		}
		svc.Image = ref
		svc.Build = nil
		svc.PullPolicy = types.PullPolicyNever
		target.Services[name] = svc
	}
	return nil
}

// restoreVolumes gives each named volume of target that st recorded a fresh copy of its
// content, with target's labels.
func (b *Backend) restoreVolumes(ctx context.Context, op string, st backend.State, target *types.Project) error {
	if len(st.Volumes) == 0 {
		return nil
	}
	base, err := b.BaseImage(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var work []func(context.Context) error
	for _, key := range slices.Sorted(maps.Keys(st.Volumes)) {
		v, ok := target.Volumes[key]
		if !ok || bool(v.External) {
			continue
		}
		name := v.Name
		if name == "" {
			name = target.Name + "_" + key
		}
		// The project's own labels (owner, task, sample, time) too, as compose would put them:
		// a process that dies before the project's containers exist leaves a volume that a
		// cleanup finds, and can tell stale.
		lbl := map[string]string{}
		maps.Copy(lbl, v.CustomLabels)
		maps.Copy(lbl, v.Labels)
		maps.Copy(lbl, labels.ProjectSelectorMap(target.Name))
		lbl[labels.ComposeVolumeLabel] = key
		lbl[labels.ComposeVersionLabel] = labels.ComposeVersion
		src := st.Volumes[key]
		work = append(work, func(ctx context.Context) error {
			if err := b.copyVolume(ctx, base, target.Name, src, name, lbl); err != nil {
				return fmt.Errorf("%s: volume %s: %w", op, key, err)
			}
			return nil
		})
	}
	// At once, as the snapshot's copies are made.
	return runAll(ctx, work)
}

// RemoveContainers removes the project's containers, one at a time: a reset keeps the
// networks, and stopping a project's containers at once on one network risks the engine's
// network deadlock for nothing here.
func (b *Backend) RemoveContainers(ctx context.Context, project string) error {
	ctrs, err := b.raw.ContainerList(ctx, container.ListOptions{All: true, Filters: cleanup.ProjectFilter(project)})
	if err != nil {
		return fmt.Errorf("remove containers of %s: %w", project, err)
	}
	var errs *multierror.Error
	for _, ctr := range ctrs {
		if err := b.raw.ContainerRemove(ctx, ctr.ID, container.RemoveOptions{Force: true}); err != nil && !client.IsErrNotFound(err) {
			errs = multierror.Append(errs, fmt.Errorf("remove container %s of %s: %w", cleanup.ContainerName(ctr), project, err))
		}
	}
	return errs.ErrorOrNil()
}
