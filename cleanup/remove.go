package cleanup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"
	"golang.org/x/sync/errgroup"
)

// ProjectLabel is the compose label naming a resource's project.
const ProjectLabel = "com.docker.compose.project"

// RemoveOptions tunes RemoveProject. The zero value is the sandbox default.
type RemoveOptions struct {
	// Grace is how long a container may take to stop after SIGTERM before it is killed.
	// Zero means DefaultGrace; a negative value kills at once.
	Grace time.Duration
	// Parallel bounds concurrent removals of one kind (default 8).
	Parallel int
}

// DefaultGrace is the sandbox stop grace: with init as PID 1, a keep-alive process exits on
// SIGTERM in milliseconds, so a longer grace only delays teardown of a stuck one.
const DefaultGrace = time.Second

// Removed counts what RemoveProject removed.
type Removed struct {
	Containers int `json:"containers"`
	Networks   int `json:"networks"`
	Volumes    int `json:"volumes"`
}

// ProjectFilter selects the composebox resources of one project.
func ProjectFilter(project string) filters.Args {
	return filters.NewArgs(filters.Arg("label", ManagedFilter), filters.Arg("label", ProjectLabel+"="+project))
}

// RemoveProject removes every container, then network, then volume of a composebox project,
// found by labels alone. What is already gone counts as removed; every other failure is
// collected into one error. It is safe to call twice and on a project that never existed.
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
					fail(fmt.Errorf("remove container %s of %s: %w", name(ctr), project, err))
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
	for _, n := range nets {
		g.Go(func() error {
			if err := c.NetworkRemove(ctx, n.ID); err != nil && !client.IsErrNotFound(err) {
				fail(fmt.Errorf("remove network %s of %s: %w", n.Name, project, err))
				return nil
			}
			mu.Lock()
			out.Networks++
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()

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
			mu.Lock()
			out.Volumes++
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return out, errs.ErrorOrNil()
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

func name(ctr container.Summary) string {
	if len(ctr.Names) > 0 {
		return ctr.Names[0][1:]
	}
	return ctr.ID[:12]
}
