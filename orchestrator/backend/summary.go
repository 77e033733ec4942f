package backend

import (
	"cmp"
	"errors"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/composebox/composebox/cleanup/labels"
)

// The project summary `ls` prints (owner status, health, counts, ports) is policy too: every
// backend feeds its resources to a Summary and gets the same Project back.

// Summary gathers one project's resources into its Project.
type Summary struct {
	p        Project
	owners   map[string]bool
	detached bool
	problems []string
}

// NewSummary starts the summary of project name.
func NewSummary(name string) *Summary {
	return &Summary{p: Project{Name: name}, owners: map[string]bool{}}
}

// SummaryContainer is one container as a Summary counts it.
type SummaryContainer struct {
	Name, Service string
	// State is the engine's container state (running, exited...); Health the healthcheck's
	// verdict ("" without one); ExitCode the exit code of an exited one, when ExitKnown.
	State, Health string
	ExitCode      int
	ExitKnown     bool
	// Config is the compose files its labels name.
	Config string
	Ports  []PublishedPort
}

// Labels records what a resource's labels say of its project: task, sample, owner (a
// detached owner label is not an owner), and creation time (the created label over
// created, the resource's own time).
func (s *Summary) Labels(lbl map[string]string, created time.Time) {
	if s.p.Task == "" {
		s.p.Task = lbl[labels.LabelTask]
	}
	if s.p.Sample == "" {
		s.p.Sample = lbl[labels.LabelSample]
	}
	if o := lbl[labels.LabelOwner]; o != "" && o != labels.OwnerDetached {
		s.owners[o] = true
	}
	if t, err := time.Parse(time.RFC3339, lbl[labels.LabelCreated]); err == nil {
		created = t
	}
	if !created.IsZero() && (s.p.Created.IsZero() || created.Before(s.p.Created)) {
		s.p.Created = created.UTC()
	}
}

// Owner records an owner (a claimer, say) beside those the labels name.
func (s *Summary) Owner(owner string) {
	if owner != "" && owner != labels.OwnerDetached {
		s.owners[owner] = true
	}
}

// Detached records that the project was handed over: only its detached marker may say so.
func (s *Summary) Detached() { s.detached = true }

// Sample sets the sample's id (a claim records the SampleInit's over the one it started with).
func (s *Summary) Sample(id string) { s.p.Sample = id }

// Pool sets the pool state.
func (s *Summary) Pool(state string) { s.p.Pool = state }

// PoolState is the pool state so far.
func (s *Summary) PoolState() string { return s.p.Pool }

// Network counts n networks.
func (s *Summary) Network(n int) { s.p.Networks += n }

// Volume counts a volume of the project's (never one of composebox's markers).
func (s *Summary) Volume() { s.p.Volumes++ }

// Container counts a container, and what is wrong with it.
func (s *Summary) Container(c SummaryContainer) {
	s.p.Containers++
	s.p.ContainerNames = append(s.p.ContainerNames, c.Name)
	if c.State == StateRunning {
		s.p.Running++
	}
	if problem := ContainerProblem(c.State, c.Health, c.ExitCode, c.ExitKnown); problem != "" {
		s.problems = append(s.problems, c.Service+":"+problem)
	}
	for _, pp := range c.Ports {
		if !slices.Contains(s.p.Ports, pp) { // an engine may list a port per address family
			s.p.Ports = append(s.p.Ports, pp)
		}
	}
	if s.p.Config == "" {
		s.p.Config = c.Config
	}
}

// ContainerProblem says what is wrong with a container, as `ls` shows it: "" when it runs and
// is neither unhealthy nor still starting, or exited 0; else unhealthy, starting, exited(N) or
// its state.
func ContainerProblem(state, health string, exitCode int, exitKnown bool) string {
	switch {
	case state == StateRunning && health == HealthUnhealthy:
		return "unhealthy"
	case state == StateRunning && health == "starting":
		return "starting"
	case state == StateRunning:
		return ""
	case state == "exited" && exitKnown && exitCode == 0:
		return ""
	case state == "exited" && exitKnown:
		return "exited(" + strconv.Itoa(exitCode) + ")"
	}
	return state
}

// Project is the summed-up project; status tells an owner's status (OwnerStatusOf, cached by
// the caller over a listing).
func (s *Summary) Project(status func(owner string) OwnerStatus) Project {
	p := s.p
	owners := slices.Sorted(maps.Keys(s.owners))
	switch {
	case s.detached:
		p.Owner, p.Status = labels.OwnerDetached, StatusDetached
	case len(owners) == 0:
		p.Status = StatusUnknown
	default:
		// One owner per project (and who claimed it from a pool); the project is stale only
		// when every one of them is dead, and alive when any is.
		p.Owner = strings.Join(owners, ",")
		p.Status = StatusStale
		for _, o := range owners {
			switch status(o) {
			case StatusAlive:
				p.Status = StatusAlive
			case StatusUnknown:
				if p.Status != StatusAlive {
					p.Status = StatusUnknown
				}
			}
		}
	}
	p.Stale = p.Status == StatusStale
	p.ContainerNames = slices.Sorted(slices.Values(p.ContainerNames))
	problems := slices.Sorted(slices.Values(s.problems))
	switch {
	case p.Containers == 0:
	case len(problems) == 0:
		p.Health = "ok"
	default:
		p.Health = strings.Join(problems, ",")
	}
	p.Ports = slices.Clone(p.Ports)
	slices.SortFunc(p.Ports, func(x, y PublishedPort) int {
		return cmp.Or(strings.Compare(x.Service, y.Service), cmp.Compare(x.ContainerPort, y.ContainerPort),
			strings.Compare(x.Protocol, y.Protocol), strings.Compare(x.HostIP, y.HostIP))
	})
	return p
}

// Owned reports whether owner is the project's only owner.
func (s *Summary) OwnedOnlyBy(owner string) bool {
	return len(s.owners) == 1 && s.owners[owner]
}

// SortProjects sorts projects by creation time, then name, as every listing returns them.
func SortProjects(ps []Project) {
	slices.SortFunc(ps, func(x, y Project) int {
		return cmp.Or(x.Created.Compare(y.Created), strings.Compare(x.Name, y.Name))
	})
}

// OwnerStatuses is OwnerStatusOf, each owner checked once: a listing's.
func OwnerStatuses() func(owner string) OwnerStatus {
	seen := map[string]OwnerStatus{}
	return func(owner string) OwnerStatus {
		s, ok := seen[owner]
		if !ok {
			s = OwnerStatusOf(owner)
			seen[owner] = s
		}
		return s
	}
}

// OwnerStatusOf says whether the process named by an owner label is alive. Only owners on
// this host can be checked: one on another host is StatusUnknown, and so never stale. A pid
// that now belongs to a process with another start time, a zombie, and a missing pid are all
// stale.
func OwnerStatusOf(owner string) OwnerStatus {
	if owner == labels.OwnerDetached {
		return StatusDetached
	}
	o, err := labels.ParseOwner(owner)
	if err != nil {
		return StatusUnknown
	}
	host, err := os.Hostname()
	if err != nil || host != o.Host {
		return StatusUnknown
	}
	state, start, err := labels.ProcessStat(o.PID)
	switch {
	case err == nil && start == o.Start && state != 'Z' && state != 'X':
		return StatusAlive
	case err == nil:
		return StatusStale
	case errors.Is(err, fs.ErrNotExist):
		// /proc can hide other users' processes (hidepid): a pid the kernel still knows but will
		// not show cannot be checked.
		if kerr := syscall.Kill(o.PID, 0); errors.Is(kerr, syscall.EPERM) {
			return StatusUnknown
		}
		return StatusStale
	default:
		return StatusUnknown
	}
}
