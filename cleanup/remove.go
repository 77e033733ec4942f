// Package cleanup removes what composebox created: a project's containers, networks, volumes
// and per-sample images, found by the engine's labels alone (see package labels), and the images
// built for tasks that no longer need them. Which projects to remove, and whether their owners
// are alive, is package tracking's business.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"
	"golang.org/x/sync/errgroup"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/hostfw"
	"github.com/composebox/composebox/orchestrator/backend"
)

// RemoveOptions tunes RemoveProject. The zero value is the sandbox default.
type RemoveOptions struct {
	// Grace is how long a container may take to stop after SIGTERM before it is killed.
	// Zero means DefaultGrace; a negative value kills at once.
	Grace time.Duration
	// Parallel bounds concurrent removals of one kind within a project (default 8).
	Parallel int
	// Projects bounds how many projects RemoveProjects removes at once (default 4).
	Projects int
	// Timeout bounds the removal of one project, which runs on a context detached from the
	// caller's so that a cancelled caller does not leave a project half removed (default 2 min).
	Timeout time.Duration
}

// DefaultGrace is the sandbox stop grace: with init as PID 1, a keep-alive process exits on
// SIGTERM in milliseconds, so a longer grace only delays teardown of a stuck one.
const DefaultGrace = time.Second

// Removed counts what RemoveProject removed: the backend boundary's own type, which the Docker
// backend returns as it is. Images counts per-sample images (labelled with the project);
// composebox builds task images once per task, so it is normally zero.
type Removed = backend.Removed

// ProjectFilter selects the composebox resources of one project.
func ProjectFilter(project string) filters.Args {
	f := filters.NewArgs()
	for _, l := range labels.ProjectSelector(project) {
		f.Add("label", l)
	}
	return f
}

// RemoveProject removes every container, then network, then volume of a composebox project,
// found by labels alone, and last the images labelled with the project (per-sample images).
// What is already gone counts as removed; every other failure is collected into one error. It
// is safe to call twice and on a project that never existed.
func RemoveProject(ctx context.Context, c client.APIClient, project string, opts RemoveOptions) (Removed, error) {
	var (
		mu   sync.Mutex
		errs *multierror.Error
		out  Removed
	)
	fail := func(err error) {
		mu.Lock()
		errs = multierror.Append(errs, err)
		mu.Unlock()
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	f := ProjectFilter(project)

	// A create request that was in flight when its caller gave up can still land after the
	// first listing, so list again until a pass finds nothing (bounded).
	var g errgroup.Group
	g.SetLimit(opts.Parallel)
	for pass := 0; pass < 3; pass++ {
		ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			return out, fmt.Errorf("remove project %s: list containers: %w", project, err)
		}
		if len(ctrs) == 0 {
			break
		}
		for _, ctr := range ctrs {
			g.Go(func() error {
				if err := removeContainer(ctx, c, ctr.ID, ctr.State, opts.Grace); err != nil {
					fail(fmt.Errorf("remove container %s of %s: %w", ContainerName(ctr), project, err))
					return nil
				}
				mu.Lock()
				out.Containers++
				mu.Unlock()
				return nil
			})
		}
		_ = g.Wait()
		if errs.ErrorOrNil() != nil {
			break
		}
	}

	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		fail(fmt.Errorf("remove project %s: list networks: %w", project, err))
	}
	var gone []string
	for _, n := range nets {
		g.Go(func() error {
			if err := removeNetwork(ctx, c, n.ID); err != nil {
				fail(fmt.Errorf("remove network %s of %s: %w", n.Name, project, err))
				return nil
			}
			mu.Lock()
			out.Networks++
			gone = append(gone, n.ID)
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	// The host firewall's rules live exactly as long as their networks.
	if len(gone) > 0 {
		// A process that cannot use the firewall (not root) made no rules; leftovers of one that
		// could are pruned by the next cleanup that can.
		if err := hostfw.New().Release(gone...); err != nil && !errors.Is(err, hostfw.ErrUnavailable) {
			fail(fmt.Errorf("remove project %s: %w", project, err))
		}
	}

	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		fail(fmt.Errorf("remove project %s: list volumes: %w", project, err))
	}
	for _, v := range vols.Volumes {
		g.Go(func() error {
			if err := c.VolumeRemove(ctx, v.Name, true); err != nil && !client.IsErrNotFound(err) {
				fail(fmt.Errorf("remove volume %s of %s: %w", v.Name, project, err))
				return nil
			}
			if !labels.IsMarker(project, v.Name) {
				mu.Lock()
				out.Volumes++
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()

	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		fail(fmt.Errorf("remove project %s: list images: %w", project, err))
	}
	for _, img := range imgs {
		g.Go(func() error {
			// Forced: the image belongs to this project alone, whose containers are gone, and
			// a forced removal drops every tag at once.
			_, err := c.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
			if err != nil && !client.IsErrNotFound(err) {
				fail(fmt.Errorf("remove image %s of %s: %w", shortID(img.ID), project, err))
				return nil
			}
			mu.Lock()
			out.Images++
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	// The project's tags of recorded states (snapshots, and what it started from).
	if n, err := removeStateTags(ctx, c, project); err != nil {
		fail(err)
	} else {
		out.Images += n
	}
	return out, errs.ErrorOrNil()
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func removeContainer(ctx context.Context, c client.APIClient, id, state string, grace time.Duration) error {
	if grace == 0 {
		grace = DefaultGrace
	}
	if state == "running" && grace > 0 {
		secs := int((grace + time.Second - 1) / time.Second)
		// A failed stop is not a failed removal: the forced removal below kills it anyway.
		_ = c.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
	}
	err := c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !client.IsErrNotFound(err) && !isRemovalInProgress(err) {
		return err
	}
	return nil
}

// removeNetwork removes a project's network. Once the project's containers are gone, an
// endpoint still on the network is either a foreign container someone connected to it or one
// the engine forgot when a container died with it (seen after a SIGKILLed run); either would
// keep the network forever, so they are disconnected by force and the removal tried once more.
func removeNetwork(ctx context.Context, c client.APIClient, id string) error {
	err := c.NetworkRemove(ctx, id)
	if err == nil || client.IsErrNotFound(err) {
		return nil
	}
	if !strings.Contains(err.Error(), "active endpoints") {
		return err
	}
	n, ierr := c.NetworkInspect(ctx, id, network.InspectOptions{})
	if ierr != nil {
		if client.IsErrNotFound(ierr) {
			return nil
		}
		return err
	}
	for key, ep := range n.Containers {
		target := ep.Name
		if target == "" {
			target = key
		}
		_ = c.NetworkDisconnect(ctx, id, target, true)
	}
	if err := c.NetworkRemove(ctx, id); err != nil && !client.IsErrNotFound(err) {
		return err
	}
	return nil
}

// ContainerName is a listed container's name, without the engine's leading slash, or its short
// id when it has none.
func ContainerName(ctr container.Summary) string {
	if len(ctr.Names) > 0 {
		return ctr.Names[0][1:]
	}
	return ctr.ID[:12]
}

// DefaultRemoveTimeout bounds the removal of one project when RemoveOptions.Timeout is zero.
const DefaultRemoveTimeout = 2 * time.Minute

// Result is the outcome of removing one project.
type Result struct {
	Name    string  `json:"name"`
	Removed Removed `json:"removed"`
	// Err is why the project could not be removed completely (nil when it was).
	Err error `json:"-"`
}

// RemoveProjects removes the named projects as RemoveProject does, in parallel with a bound,
// and returns one Result per project, in order. Each removal runs on a context detached from
// ctx with its own deadline: once ctx is done no further project is started, but those started
// are finished. Failures are collected into one error; what was already gone counts as
// removed, so removing the same projects again is a no-op.
func RemoveProjects(ctx context.Context, c client.APIClient, projects []string, opts RemoveOptions) ([]Result, error) {
	if opts.Projects <= 0 {
		opts.Projects = 4
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRemoveTimeout
	}
	results := make([]Result, len(projects))
	var g errgroup.Group
	g.SetLimit(opts.Projects)
	for i, p := range projects {
		results[i].Name = p
		if ctx.Err() != nil {
			results[i].Err = fmt.Errorf("remove project %s: %w", p, ctx.Err())
			continue
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				results[i].Err = fmt.Errorf("remove project %s: %w", p, ctx.Err())
				return nil
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Timeout)
			defer cancel()
			results[i].Removed, results[i].Err = RemoveProject(rctx, c, p, opts)
			return nil
		})
	}
	_ = g.Wait()
	var errs *multierror.Error
	for _, r := range results {
		if r.Err != nil {
			errs = multierror.Append(errs, r.Err)
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return results, fmt.Errorf("cleanup: %w", err)
	}
	return results, nil
}
