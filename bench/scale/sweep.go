package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/cleanup/tracking"
	"github.com/composebox/composebox/internal/engine"
	"github.com/composebox/composebox/orchestrator/backend"
)

func connect(ctx context.Context) (client.APIClient, error) {
	c, _, err := engine.Connect(ctx, 10*time.Second)
	return c, err
}

// sweep removes every project of the benchmark's tasks (composebox's and the baseline's alike:
// both carry dev.composebox.managed and a task label), then anything labelled with those tasks
// that is not part of a project, repeating until a pass finds nothing, since a create that was in
// flight when its caller was interrupted can still land. It returns how many projects it removed.
func sweep(ctx context.Context, c client.APIClient) (int, error) {
	removed := 0
	var last error
	for pass := 0; pass < 6; pass++ {
		var projects []backend.Project
		for _, t := range benchTasks {
			ps, err := tracking.Plan(ctx, c, backend.Selector{All: true, Task: t})
			if err != nil {
				return removed, err
			}
			projects = append(projects, ps...)
		}
		stray, err := strays(ctx, c)
		if err != nil {
			return removed, err
		}
		if len(projects) == 0 && stray.empty() {
			return removed, nil
		}
		results, err := tracking.RemovePlanned(ctx, c, projects, cleanup.RemoveOptions{Projects: 8})
		for _, r := range results {
			if r.Err == nil {
				removed++
			}
		}
		last = errors.Join(err, stray.remove(ctx, c))
		select {
		case <-ctx.Done():
			return removed, ctx.Err()
		case <-time.After(time.Duration(pass) * 500 * time.Millisecond):
		}
	}
	if last == nil {
		last = errors.New("benchmark resources still listed after 6 passes")
	}
	return removed, fmt.Errorf("sweep: %w", last)
}

// leftovers is what the benchmark's labels still select.
type leftovers struct {
	containers, networks, volumes []string
}

func (l leftovers) empty() bool {
	return len(l.containers)+len(l.networks)+len(l.volumes) == 0
}

func (l leftovers) String() string {
	return fmt.Sprintf("%d containers, %d networks, %d volumes", len(l.containers), len(l.networks), len(l.volumes))
}

// strays lists every container, network and volume labelled with a benchmark task.
func strays(ctx context.Context, c client.APIClient) (leftovers, error) {
	var l leftovers
	for _, t := range benchTasks {
		f := filters.NewArgs(filters.Arg("label", labels.ManagedFilter), filters.Arg("label", labels.LabelTask+"="+t))
		ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			return l, fmt.Errorf("list containers: %w", err)
		}
		for _, x := range ctrs {
			l.containers = append(l.containers, x.ID)
		}
		nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
		if err != nil {
			return l, fmt.Errorf("list networks: %w", err)
		}
		for _, x := range nets {
			l.networks = append(l.networks, x.ID)
		}
		vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
		if err != nil {
			return l, fmt.Errorf("list volumes: %w", err)
		}
		for _, x := range vols.Volumes {
			l.volumes = append(l.volumes, x.Name)
		}
	}
	return l, nil
}

func (l leftovers) remove(ctx context.Context, c client.APIClient) error {
	var errs []error
	for _, id := range l.containers {
		if err := c.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !client.IsErrNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %.12s: %w", id, err))
		}
	}
	for _, id := range l.networks {
		if err := c.NetworkRemove(ctx, id); err != nil && !client.IsErrNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %.12s: %w", id, err))
		}
	}
	for _, name := range l.volumes {
		if err := c.VolumeRemove(ctx, name, true); err != nil && !client.IsErrNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// removeBenchImages removes the baseline's web image and the images composebox built for the
// benchmark's tasks (never the base image, which other runs share). Failures are ignored: an
// image left behind is only disk space, and the next run reuses it.
func removeBenchImages(ctx context.Context, c client.APIClient) {
	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", benchWebRepo))})
	if err == nil {
		for _, im := range imgs {
			_, _ = c.ImageRemove(ctx, im.ID, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	}
	for _, t := range []string{taskCbx, taskCbxCap} {
		_, _ = cleanup.PruneImages(ctx, c, cleanup.ImageOptions{Task: t})
	}
}

// procStatusKB reads a field of /proc/self/status in KiB (VmHWM: peak resident set; VmRSS:
// current).
func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
