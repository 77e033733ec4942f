package tracking

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
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
	"github.com/composebox/composebox/orchestrator/backend"
)

// listed is one project while the listing aggregates its resources: the project as List
// returns it, and its summary, which knows its owners.
type listed struct {
	backend.Project
	sum *backend.Summary
}

var exitedStatus = regexp.MustCompile(`^Exited \((-?\d+)\)`)

// summaryContainer is a listed container as backend.Summary counts it: its health and exit
// code are read from the engine's status line.
func summaryContainer(x container.Summary) backend.SummaryContainer {
	sc := backend.SummaryContainer{Name: cleanup.ContainerName(x), Service: x.Labels[labels.ComposeServiceLabel],
		State: string(x.State), Config: x.Labels[labels.ComposeConfigFilesLabel]}
	switch {
	case strings.Contains(x.Status, "(unhealthy)"):
		sc.Health = backend.HealthUnhealthy
	case strings.Contains(x.Status, "(health: starting)"):
		sc.Health = "starting"
	}
	if m := exitedStatus.FindStringSubmatch(x.Status); m != nil {
		sc.ExitCode, _ = strconv.Atoi(m[1])
		sc.ExitKnown = true
	}
	for _, port := range x.Ports {
		if port.PublicPort == 0 {
			continue
		}
		sc.Ports = append(sc.Ports, backend.PublishedPort{Service: sc.Service, ContainerPort: int(port.PrivatePort),
			Protocol: port.Type, HostIP: port.IP, HostPort: int(port.PublicPort)})
	}
	return sc
}

// List finds every composebox project from its containers, networks and volumes, so that a
// project with only a leftover network or volume is found too (`docker compose ls` misses
// those), and last from the tags of recorded states (snapshots), so that a project of which
// only such a tag is left (its process died between the commit and the project's first
// container) is found too, owned by the process that committed the image. Resources without a compose project label are not projects and are left out. The
// result is sorted by creation time, then name. Engine is left empty: only the backend knows
// which engine c is.
func List(ctx context.Context, c client.APIClient) ([]backend.Project, error) {
	ls, err := listAll(ctx, c)
	if err != nil {
		return nil, err
	}
	return projects(ls), nil
}

// listAll is List with each project's owners kept.
func listAll(ctx context.Context, c client.APIClient) ([]listed, error) {
	return list(ctx, c, filters.NewArgs(filters.Arg("label", labels.ManagedFilter)), "")
}

// projects is ls without the listing's bookkeeping.
func projects(ls []listed) []backend.Project {
	out := make([]backend.Project, len(ls))
	for i, l := range ls {
		out[i] = l.Project
	}
	return out
}

// list aggregates the resources matching f into projects, and the tags of recorded states that
// owner committed (any owner's when "") into projects that have nothing else. The status of
// each is computed from its owner labels (and the detached marker, when f lets it through).
func list(ctx context.Context, c client.APIClient, f filters.Args, owner string) ([]listed, error) {
	agg := aggregator{projects: map[string]*backend.Summary{}}
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list projects: containers: %w", err)
	}
	for _, x := range ctrs {
		if p := agg.add(x.Labels, time.Unix(x.Created, 0), ""); p != nil {
			p.Container(summaryContainer(x))
		}
	}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list projects: networks: %w", err)
	}
	for _, x := range nets {
		if p := agg.add(x.Labels, x.Created, ""); p != nil {
			p.Network(1)
		}
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list projects: volumes: %w", err)
	}
	for _, x := range vols.Volumes {
		created, _ := time.Parse(time.RFC3339, x.CreatedAt)
		if p := agg.add(x.Labels, created, markerKind(x.Name, x.Labels)); p != nil && !labels.IsMarker(x.Labels[labels.ComposeProjectLabel], x.Name) {
			p.Volume()
		}
	}
	if err := agg.stateTags(ctx, c, owner); err != nil {
		return nil, err
	}
	return agg.result(), nil
}

// stateTags adds the projects of which nothing is left but tags in their state repositories
// (cleanup.StateRepo) of images a snapshot committed, with the committer's labels as the
// project's: its owner, task and time. A project that has anything else is the business of
// its other resources' labels: a sample started from a state another process committed is
// its own process's, not the committer's.
func (a *aggregator) stateTags(ctx context.Context, c client.APIClient, owner string) error {
	f := filters.NewArgs(filters.Arg("label", labels.LabelStateImage+"=true"))
	if owner != "" {
		f.Add("label", labels.LabelStateOwner+"="+owner)
	}
	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list projects: snapshot images: %w", err)
	}
	others := make(map[string]bool, len(a.projects))
	for name := range a.projects {
		others[name] = true
	}
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			project, ok := cleanup.StateProject(tag)
			if !ok || others[project] {
				continue
			}
			a.add(map[string]string{
				labels.ComposeProjectLabel: project,
				labels.LabelTask:           img.Labels[labels.LabelStateTask],
				labels.LabelOwner:          img.Labels[labels.LabelStateOwner],
				labels.LabelCreated:        img.Labels[labels.LabelStateCreated],
			}, time.Unix(img.Created, 0), "")
		}
	}
	return nil
}

type aggregator struct {
	projects map[string]*backend.Summary
}

// add records one resource and returns its project's summary (nil when it names none). marker
// is the kind of marker volume the resource is, "" for none: only a marker can say that a
// project is detached, warm or claimed, whatever labels anything else carries.
func (a *aggregator) add(lbl map[string]string, created time.Time, marker string) *backend.Summary {
	name := lbl[labels.ComposeProjectLabel]
	if name == "" {
		return nil
	}
	p := a.projects[name]
	if p == nil {
		p = backend.NewSummary(name)
		a.projects[name] = p
	}
	p.Labels(lbl, created)
	pool := lbl[labels.LabelPool]
	switch {
	case pool == labels.PoolWarm && marker == markerWarm, pool == labels.PoolClaimed && marker == markerClaim, pool == labels.PoolPooled:
		p.Pool(poolState(p.PoolState(), lbl))
	}
	if pool == labels.PoolClaimed && marker == markerClaim {
		// The claim records the id of the SampleInit that took the sample, over the one it was
		// started with.
		p.Sample(lbl[labels.LabelSample])
	}
	if lbl[labels.LabelOwner] == labels.OwnerDetached && marker == markerDetached {
		p.Detached()
	}
	return p
}

func (a *aggregator) result() []listed {
	status := backend.OwnerStatuses()
	out := make([]listed, 0, len(a.projects))
	for _, s := range a.projects {
		out = append(out, listed{Project: s.Project(status), sum: s})
	}
	slices.SortFunc(out, func(x, y listed) int {
		return cmp.Or(x.Created.Compare(y.Created), strings.Compare(x.Name, y.Name))
	})
	return out
}

// ownedOnlyBy reports whether every owner label on l's resources is exactly owner.
func (l listed) ownedOnlyBy(owner string) bool {
	return l.sum.OwnedOnlyBy(owner)
}
