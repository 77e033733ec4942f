package tracking

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/orchestrator/backend"
)

// listed is one project while the listing aggregates its resources: the project as List
// returns it, and what the listing needs to compute its status and health but a project's
// description does not show.
type listed struct {
	backend.Project
	// owners are the non-detached owner labels seen on the project's resources.
	owners map[string]bool
	// problems are the containers that are not fine, as service:state.
	problems []string
}

var exitedStatus = regexp.MustCompile(`^Exited \((-?\d+)\)`)

// containerProblem says what is wrong with a listed container: "" when it runs and is neither
// unhealthy nor still starting, or exited 0; else unhealthy, starting, exited(N) or its state.
func containerProblem(x container.Summary) string {
	switch x.State {
	case container.StateRunning:
		switch {
		case strings.Contains(x.Status, "(unhealthy)"):
			return "unhealthy"
		case strings.Contains(x.Status, "(health: starting)"):
			return "starting"
		}
		return ""
	case container.StateExited:
		if m := exitedStatus.FindStringSubmatch(x.Status); m != nil {
			if m[1] == "0" {
				return ""
			}
			return "exited(" + m[1] + ")"
		}
	}
	return string(x.State)
}

// List finds every composebox project from its containers, networks and volumes, so that a
// project with only a leftover network or volume is found too (`docker compose ls` misses
// those). Resources without a compose project label are not projects and are left out. The
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
	return list(ctx, c, filters.NewArgs(filters.Arg("label", labels.ManagedFilter)))
}

// projects is ls without the listing's bookkeeping.
func projects(ls []listed) []backend.Project {
	out := make([]backend.Project, len(ls))
	for i, l := range ls {
		out[i] = l.Project
	}
	return out
}

// list aggregates the resources matching f into projects. The status of each is computed from
// its owner labels (and the detached marker, when f lets it through).
func list(ctx context.Context, c client.APIClient, f filters.Args) ([]listed, error) {
	agg := aggregator{projects: map[string]*listed{}, detached: map[string]bool{}}
	ctrs, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list projects: containers: %w", err)
	}
	for _, x := range ctrs {
		p := agg.add(x.Labels, time.Unix(x.Created, 0), "")
		if p == nil {
			continue
		}
		p.Containers++
		p.ContainerNames = append(p.ContainerNames, cleanup.ContainerName(x))
		if x.State == container.StateRunning {
			p.Running++
		}
		if problem := containerProblem(x); problem != "" {
			p.problems = append(p.problems, x.Labels[labels.ComposeServiceLabel]+":"+problem)
		}
		for _, port := range x.Ports {
			if port.PublicPort == 0 {
				continue
			}
			pp := backend.PublishedPort{Service: x.Labels[labels.ComposeServiceLabel], ContainerPort: int(port.PrivatePort),
				Protocol: port.Type, HostIP: port.IP, HostPort: int(port.PublicPort)}
			if !slices.Contains(p.Ports, pp) { // the engine lists a port per address family
				p.Ports = append(p.Ports, pp)
			}
		}
		if p.Config == "" {
			p.Config = x.Labels[labels.ComposeConfigFilesLabel]
		}
	}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list projects: networks: %w", err)
	}
	for _, x := range nets {
		if p := agg.add(x.Labels, x.Created, ""); p != nil {
			p.Networks++
		}
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list projects: volumes: %w", err)
	}
	for _, x := range vols.Volumes {
		created, _ := time.Parse(time.RFC3339, x.CreatedAt)
		if p := agg.add(x.Labels, created, markerKind(x.Name, x.Labels)); p != nil && !labels.IsMarker(p.Name, x.Name) {
			p.Volumes++
		}
	}
	return agg.result(), nil
}

type aggregator struct {
	projects map[string]*listed
	detached map[string]bool
}

// add records one resource and returns its project (nil when it names none). marker is the
// kind of marker volume the resource is, "" for none: only a marker can say that a project is
// detached, warm or claimed, whatever labels anything else carries.
func (a *aggregator) add(lbl map[string]string, created time.Time, marker string) *listed {
	name := lbl[labels.ComposeProjectLabel]
	if name == "" {
		return nil
	}
	p := a.projects[name]
	if p == nil {
		p = &listed{Project: backend.Project{Name: name}, owners: map[string]bool{}}
		a.projects[name] = p
	}
	if p.Task == "" {
		p.Task = lbl[labels.LabelTask]
	}
	if p.Sample == "" {
		p.Sample = lbl[labels.LabelSample]
	}
	pool := lbl[labels.LabelPool]
	switch {
	case pool == labels.PoolWarm && marker == markerWarm, pool == labels.PoolClaimed && marker == markerClaim, pool == labels.PoolPooled:
		p.Pool = poolState(p.Pool, lbl)
	}
	if pool == labels.PoolClaimed && marker == markerClaim {
		// The claim records the id of the SampleInit that took the sample, over the one it was
		// started with.
		p.Sample = lbl[labels.LabelSample]
	}
	switch owner := lbl[labels.LabelOwner]; owner {
	case labels.OwnerDetached:
		if marker == markerDetached {
			a.detached[name] = true
		}
	case "":
	default:
		p.owners[owner] = true
	}
	if t, err := time.Parse(time.RFC3339, lbl[labels.LabelCreated]); err == nil {
		created = t
	}
	if !created.IsZero() && (p.Created.IsZero() || created.Before(p.Created)) {
		p.Created = created.UTC()
	}
	return p
}

func (a *aggregator) result() []listed {
	statuses := map[string]backend.OwnerStatus{}
	status := func(owner string) backend.OwnerStatus {
		s, ok := statuses[owner]
		if !ok {
			s = OwnerStatus(owner)
			statuses[owner] = s
		}
		return s
	}
	out := make([]listed, 0, len(a.projects))
	for name, p := range a.projects {
		owners := slices.Sorted(maps.Keys(p.owners))
		switch {
		case a.detached[name]:
			p.Owner, p.Status = labels.OwnerDetached, backend.StatusDetached
		case len(owners) == 0:
			p.Status = backend.StatusUnknown
		default:
			// One owner per project; should several ever appear, the project is stale only when
			// every one of them is dead, and alive when any is.
			p.Owner = strings.Join(owners, ",")
			p.Status = backend.StatusStale
			for _, o := range owners {
				switch s := status(o); s {
				case backend.StatusAlive:
					p.Status = backend.StatusAlive
				case backend.StatusUnknown:
					if p.Status != backend.StatusAlive {
						p.Status = backend.StatusUnknown
					}
				}
			}
		}
		p.Stale = p.Status == backend.StatusStale
		slices.Sort(p.ContainerNames)
		slices.Sort(p.problems)
		switch {
		case p.Containers == 0:
		case len(p.problems) == 0:
			p.Health = "ok"
		default:
			p.Health = strings.Join(p.problems, ",")
		}
		slices.SortFunc(p.Ports, func(x, y backend.PublishedPort) int {
			return cmp.Or(strings.Compare(x.Service, y.Service), cmp.Compare(x.ContainerPort, y.ContainerPort),
				strings.Compare(x.Protocol, y.Protocol), strings.Compare(x.HostIP, y.HostIP))
		})
		out = append(out, *p)
	}
	slices.SortFunc(out, func(x, y listed) int {
		return cmp.Or(x.Created.Compare(y.Created), strings.Compare(x.Name, y.Name))
	})
	return out
}

// ownedOnlyBy reports whether every owner label on l's resources is exactly owner.
func (l listed) ownedOnlyBy(owner string) bool {
	return len(l.owners) == 1 && l.owners[owner]
}
