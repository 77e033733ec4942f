package dockerbackend

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// stateName is what a state's name may be: it goes into image tags and volume names.
var stateName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,39}$`)

// unpauseTimeout bounds the unpause of a cut, which runs even when the caller gave up: a
// sample must never be left paused.
const unpauseTimeout = 30 * time.Second

// Snapshot pauses every running container of the project, commits each service's container
// (the pause is the engine's own, so the commit itself does not pause) and copies each named
// volume into a volume of the state's own, then unpauses them all.
//
// The committed images are tagged cleanup.StateRepo(owner):snap.NAME.SERVICE; their labels
// that composebox and compose put on the source's container are blanked, so that neither the
// source's teardown nor its pool's queries take the image, or a container run from it, for the
// source's, and they carry the state labels instead (labels.LabelStateImage and the others),
// which let a cleanup find a tag whose project has nothing else left. The volumes are labelled
// with the owner project, the task, the process and the time, so that the owner's teardown
// removes them and a cleanup finds them as the owner's should the owner have nothing else.
func (b *Backend) Snapshot(ctx context.Context, req backend.SnapshotRequest) (_ backend.State, retErr error) {
	op := fmt.Sprintf("snapshot %s of %s", req.Name, req.Project)
	st := backend.State{Name: req.Name, Owner: req.Owner, Project: req.Project, Images: map[string]string{}, Volumes: map[string]string{}}
	if !stateName.MatchString(req.Name) {
		return st, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("%s: a snapshot's name is 1 to 40 of a-z, 0-9, '_', '.', '-', starting with a letter or digit", op))
	}
	req = stamped(req)
	c := b.raw
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: cleanup.ProjectFilter(req.Project)})
	if err != nil {
		return st, fmt.Errorf("%s: list containers: %w", op, err)
	}
	byService := map[string]container.Summary{}
	for _, ctr := range ctrs {
		svc := ctr.Labels[labels.ComposeServiceLabel]
		if svc == "" || ctr.Labels[labels.ComposeOneoffLabel] == "True" {
			continue // a volume-copy helper of an earlier cut, or a one-off run
		}
		if _, dup := byService[svc]; dup {
			return st, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("%s: service %s has several containers; a snapshot records one per service", op, svc))
		}
		byService[svc] = ctr
	}
	if len(byService) == 0 {
		return st, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s: the project has no containers", op))
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: cleanup.ProjectFilter(req.Project)})
	if err != nil {
		return st, fmt.Errorf("%s: list volumes: %w", op, err)
	}
	base, err := b.BaseImage(ctx)
	if err != nil {
		return st, fmt.Errorf("%s: %w", op, err)
	}

	// The cut: pause what runs, so that every container and volume is taken at one moment.
	var paused []string
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unpauseTimeout)
		defer cancel()
		var uerr error
		for _, id := range paused {
			if err := c.ContainerUnpause(uctx, id); err != nil {
				uerr = multierror.Append(uerr, err)
			}
		}
		if uerr != nil && retErr == nil {
			// The sample is left paused: the caller must hear of it, and keeps no state it
			// would not know it has.
			retErr = fmt.Errorf("%s: unpause: %w", op, uerr)
			if rerr := b.RemoveState(context.WithoutCancel(uctx), st); rerr != nil {
				retErr = multierror.Append(retErr, rerr)
			}
		}
	}()
	for _, ctr := range byService {
		if ctr.State != "running" {
			continue
		}
		if err := c.ContainerPause(ctx, ctr.ID); err != nil {
			return st, fmt.Errorf("%s: pause %s: %w", op, cleanup.ContainerName(ctr), err)
		}
		paused = append(paused, ctr.ID)
	}
	fail := func(err error) (backend.State, error) {
		if rerr := b.RemoveState(context.WithoutCancel(ctx), st); rerr != nil {
			err = multierror.Append(err, rerr)
		}
		return st, err
	}
	if err := b.recordOwner(ctx, &st, req); err != nil {
		return fail(fmt.Errorf("%s: %w", op, err))
	}
	// The commits and the volume copies run at once: the sample stays paused until the last
	// one ends. Each name is in st before its work starts, so that a failure removes whatever
	// was made (a removal of what does not exist is no error).
	var work []func(context.Context) error
	for _, svc := range slices.Sorted(maps.Keys(byService)) {
		ctr := byService[svc]
		ref := fmt.Sprintf("%s:snap.%s.%s", cleanup.StateRepo(req.Owner), req.Name, svc)
		st.Images[svc] = ref
		work = append(work, func(ctx context.Context) error {
			if _, err := c.ContainerCommit(ctx, ctr.ID, container.CommitOptions{Reference: ref, Pause: false, Changes: stateLabels(ctr.Labels, req)}); err != nil {
				return fmt.Errorf("%s: commit %s: %w", op, svc, err)
			}
			return nil
		})
	}
	for _, v := range vols.Volumes {
		key := v.Labels[labels.ComposeVolumeLabel]
		if key == "" || labels.IsMarker(req.Project, v.Name) || v.Labels[labels.LabelState] != "" {
			continue
		}
		name := fmt.Sprintf("%s_cbxstate.%s.%s", req.Owner, req.Name, key)
		st.Volumes[key] = name
		work = append(work, func(ctx context.Context) error {
			if err := b.copyVolume(ctx, base, req.Owner, v.Name, name, stateVolumeLabels(req, key)); err != nil {
				return fmt.Errorf("%s: copy volume %s: %w", op, key, err)
			}
			return nil
		})
	}
	if err := runAll(ctx, work); err != nil {
		return fail(err)
	}
	return st, nil
}

// runAll runs work at once and returns every failure; the first cancels the others.
func runAll(ctx context.Context, work []func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		errs *multierror.Error
		wg   sync.WaitGroup
	)
	for _, w := range work {
		wg.Go(func() {
			if err := w(ctx); err != nil {
				mu.Lock()
				errs = multierror.Append(errs, err)
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errs.ErrorOrNil()
}

// recordOwner gives a state whose owner is not the project it is taken from (a snapshot the
// task keeps, a warm pool's copy) an empty volume of the owner's, labelled with the process
// and the task, before anything else is made: the owner has no other resource, and a cleanup
// finds it, and tells whether it is stale, by this volume. It is st.Volumes[""].
func (b *Backend) recordOwner(ctx context.Context, st *backend.State, req backend.SnapshotRequest) error {
	if req.Owner == st.Project {
		return nil
	}
	name := fmt.Sprintf("%s_cbxstate.%s", req.Owner, req.Name)
	st.Volumes[""] = name
	if err := b.raw.VolumeRemove(ctx, name, true); err != nil && !client.IsErrNotFound(err) {
		return fmt.Errorf("remove the old %s: %w", name, err)
	}
	if _, err := b.raw.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: stateVolumeLabels(req, "")}); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return nil
}

// stamped is req with its process and time filled in: this process, now.
func stamped(req backend.SnapshotRequest) backend.SnapshotRequest {
	if req.Process == "" {
		req.Process = labels.SelfOwner()
	}
	if req.Created.IsZero() {
		req.Created = time.Now()
	}
	return req
}

// stateVolumeLabels are the labels of the volume of req's state that copies the volume key.
func stateVolumeLabels(req backend.SnapshotRequest, key string) map[string]string {
	return map[string]string{
		labels.LabelManaged: "true", labels.ComposeProjectLabel: req.Owner,
		labels.LabelState: req.Name, labels.LabelStateVolume: key,
		labels.LabelTask: req.Task, labels.LabelOwner: req.Process, labels.LabelCreated: req.Created.UTC().Format(time.RFC3339),
	}
}

// stateLabels are the commit's changes that blank the source container's composebox and
// compose labels on the image, and put the state's own labels on it.
func stateLabels(l map[string]string, req backend.SnapshotRequest) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		if strings.HasPrefix(k, "dev.composebox.state.") {
			continue // set below
		}
		if strings.HasPrefix(k, "dev.composebox.") || strings.HasPrefix(k, "com.docker.compose.") {
			out = append(out, fmt.Sprintf("LABEL %q=\"\"", k))
		}
	}
	for _, kv := range [][2]string{
		{labels.LabelStateImage, "true"}, {labels.LabelStateOwner, req.Process},
		{labels.LabelStateTask, req.Task}, {labels.LabelStateCreated, req.Created.UTC().Format(time.RFC3339)},
	} {
		out = append(out, fmt.Sprintf("LABEL %q=%q", kv[0], kv[1]))
	}
	return out
}

// copyVolume copies the content of volume src into dst, created with lbl (or emptied if it
// exists), with cp in a helper container on composebox's base image that mounts both (the
// engine API has no volume copy). The helper carries owner's labels, so that a crash leaves
// nothing the owner's teardown would not find.
func (b *Backend) copyVolume(ctx context.Context, img, owner, src, dst string, lbl map[string]string) error {
	c := b.raw
	// The engine creates a missing volume that a container mounts, without labels: a source
	// removed meanwhile (with its snapshot's sample) would come back as a leak no cleanup finds.
	if _, err := c.VolumeInspect(ctx, src); err != nil {
		if client.IsErrNotFound(err) {
			return errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("copy %s: it is gone (removed with its snapshot)", src))
		}
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := c.VolumeRemove(ctx, dst, true); err != nil && !client.IsErrNotFound(err) {
		return fmt.Errorf("remove the old %s: %w", dst, err)
	}
	if _, err := c.VolumeCreate(ctx, volume.CreateOptions{Name: dst, Labels: lbl}); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	var errs *multierror.Error
	// One helper mounting both volumes copies with cp inside the engine's host: a tar stream
	// through the API costs several times more for large volumes.
	r, err := c.ContainerCreate(ctx, &container.Config{Image: img, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"cp -a /cbx/from/. /cbx/to/"}, Labels: labels.ProjectSelectorMap(owner)},
		&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: src, Target: "/cbx/from", ReadOnly: true},
			{Type: mount.TypeVolume, Source: dst, Target: "/cbx/to"},
		}}, nil, nil, "")
	if r.ID != "" {
		defer b.removeHelper(ctx, r.ID, &errs)
	}
	if err != nil {
		return err
	}
	wait, werr := c.ContainerWait(ctx, r.ID, container.WaitConditionNextExit)
	if err := c.ContainerStart(ctx, r.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	select {
	case res := <-wait:
		if res.StatusCode != 0 {
			return fmt.Errorf("copy %s to %s: cp exited %d", src, dst, res.StatusCode)
		}
	case err := <-werr:
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return errs.ErrorOrNil()
}

func (b *Backend) removeHelper(ctx context.Context, id string, errs **multierror.Error) {
	if err := b.raw.ContainerRemove(context.WithoutCancel(ctx), id, container.RemoveOptions{Force: true, RemoveVolumes: false}); err != nil && !client.IsErrNotFound(err) {
		*errs = multierror.Append(*errs, fmt.Errorf("remove volume-copy helper %.12s: %w", id, err))
	}
}

// CopyState tags st's images again in req.Owner's repository, under req.Name, and copies its
// volumes into volumes of req.Owner's: a tag costs nothing, and the image goes only with its
// last tag.
func (b *Backend) CopyState(ctx context.Context, st backend.State, req backend.SnapshotRequest) (backend.State, error) {
	op := fmt.Sprintf("copy snapshot %s of %s to %s", st.Name, st.Owner, req.Owner)
	out := backend.State{Name: req.Name, Owner: req.Owner, Project: st.Project, Images: map[string]string{}, Volumes: map[string]string{}}
	if !stateName.MatchString(req.Name) {
		return out, errdefs.New(errdefs.ErrInvalidConfig, fmt.Sprintf("%s: a snapshot's name is 1 to 40 of a-z, 0-9, '_', '.', '-', starting with a letter or digit", op))
	}
	req = stamped(req)
	fail := func(err error) (backend.State, error) {
		if rerr := b.RemoveState(context.WithoutCancel(ctx), out); rerr != nil {
			err = multierror.Append(err, rerr)
		}
		return out, err
	}
	if err := b.recordOwner(ctx, &out, req); err != nil {
		return fail(fmt.Errorf("%s: %w", op, err))
	}
	for _, svc := range slices.Sorted(maps.Keys(st.Images)) {
		ref := fmt.Sprintf("%s:snap.%s.%s", cleanup.StateRepo(req.Owner), req.Name, svc)
		if err := b.raw.ImageTag(ctx, st.Images[svc], ref); err != nil {
			return fail(fmt.Errorf("%s: tag %s: %w", op, svc, err))
		}
		out.Images[svc] = ref
	}
	if len(st.Volumes) == 0 {
		return out, nil
	}
	base, err := b.BaseImage(ctx)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", op, err))
	}
	for _, key := range slices.Sorted(maps.Keys(st.Volumes)) {
		if key == "" {
			continue // st's owner's record, made above for the copy's owner
		}
		name := fmt.Sprintf("%s_cbxstate.%s.%s", req.Owner, req.Name, key)
		out.Volumes[key] = name
		if err := b.copyVolume(ctx, base, req.Owner, st.Volumes[key], name, stateVolumeLabels(req, key)); err != nil {
			return fail(fmt.Errorf("%s: copy volume %s: %w", op, key, err))
		}
	}
	return out, nil
}

// RemoveState removes st's image tags (an image goes with its last tag, once no container
// uses it) and volumes.
func (b *Backend) RemoveState(ctx context.Context, st backend.State) error {
	var errs *multierror.Error
	for _, ref := range st.Images {
		if _, err := b.raw.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !client.IsErrNotFound(err) {
			errs = multierror.Append(errs, fmt.Errorf("remove snapshot %s: image %s: %w", st.Name, ref, err))
		}
	}
	for _, v := range st.Volumes {
		if err := b.raw.VolumeRemove(ctx, v, true); err != nil && !client.IsErrNotFound(err) {
			errs = multierror.Append(errs, fmt.Errorf("remove snapshot %s: volume %s: %w", st.Name, v, err))
		}
	}
	return errs.ErrorOrNil()
}

// FindState finds a state from its tags and volumes alone, so that one process resets to a
// snapshot another took.
func (b *Backend) FindState(ctx context.Context, owner, name string) (backend.State, error) {
	st := backend.State{Name: name, Owner: owner, Project: owner, Images: map[string]string{}, Volumes: map[string]string{}}
	repo := cleanup.StateRepo(owner)
	imgs, err := b.raw.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil {
		return st, fmt.Errorf("find snapshot %s of %s: %w", name, owner, err)
	}
	prefix := repo + ":snap." + name + "."
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if svc, ok := strings.CutPrefix(tag, prefix); ok {
				st.Images[svc] = tag
			}
		}
	}
	f := cleanup.ProjectFilter(owner)
	f.Add("label", labels.LabelState+"="+name)
	vols, err := b.raw.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return st, fmt.Errorf("find snapshot %s of %s: %w", name, owner, err)
	}
	for _, v := range vols.Volumes {
		if key := v.Labels[labels.LabelStateVolume]; key != "" {
			st.Volumes[key] = v.Name
		}
	}
	if len(st.Images) == 0 {
		return st, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("find snapshot %s of %s: no such snapshot", name, owner))
	}
	return st, nil
}
