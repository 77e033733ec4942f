package lifecycle

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/lifecycle/sandboxio"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Docker's healthcheck defaults, used where a healthcheck leaves a field unset.
const (
	defaultHealthInterval = 30 * time.Second
	defaultHealthTimeout  = 30 * time.Second
	defaultHealthRetries  = 3
	// minBudget bounds the wait for services that only have to be running.
	minBudget = 30 * time.Second
	// DefaultPollInterval is the readiness poll: well under compose's 500 ms, and cheap, since
	// only containers not yet ready are inspected.
	DefaultPollInterval = 50 * time.Millisecond
	logTailLines        = 50
)

// WaitOptions configures Wait. The zero value derives the budget from the healthchecks.
type WaitOptions struct {
	// Timeout overrides the budget derived by Budget.
	Timeout time.Duration
	// Interval between polls; default DefaultPollInterval.
	Interval time.Duration
	// NoProbe leaves healthchecks to Docker alone: readiness then waits for Docker's first
	// probe, which Engine 20.10 runs only after the healthcheck's interval.
	NoProbe bool
	// OnReady, when set, is called once per service as it becomes ready, from the waiting
	// goroutine: it must be quick.
	OnReady func(ServiceState)
}

// ServiceState is one service container's state as Wait last saw it: the contract's.
type ServiceState = backend.ServiceState

// NotReadyError reports a project that did not become ready: the contract's, which every
// backend returns.
type NotReadyError = backend.NotReadyError

// Budget is how long a container may take to become ready, from its healthcheck: start_period +
// retries × (interval + timeout), with Docker's defaults for unset fields, so that a service gets
// the time its own healthcheck allows. A container without a healthcheck gets minBudget.
func Budget(hc *container.HealthConfig) time.Duration {
	if hc == nil || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
		return minBudget
	}
	interval, timeout, retries := hc.Interval, hc.Timeout, hc.Retries
	if interval <= 0 {
		interval = defaultHealthInterval
	}
	if timeout <= 0 {
		timeout = defaultHealthTimeout
	}
	if retries <= 0 {
		retries = defaultHealthRetries
	}
	return max(minBudget, hc.StartPeriod+time.Duration(retries)*(interval+timeout))
}

// Wait waits until every service container of p is running (and healthy where it has a
// healthcheck) or has exited 0, the budget runs out, or one fails. An unhealthy service, or one
// that exited non-zero, fails the wait at once. It returns every service's state, in service
// name order.
//
// Readiness does not wait for Docker's first probe, which Engine 20.10 runs only after the
// healthcheck's interval (30 s by default): while Docker still says "starting", Wait runs the
// healthcheck's test itself through exec, as the container's user and with its timeout, at
// once and then backing off from 50 ms. A service is ready when that probe succeeds or Docker
// reports healthy; only Docker's own verdict can make it unhealthy. Docker's probe keeps the
// steady state.
func (e *Engine) Wait(ctx context.Context, p *types.Project, opts WaitOptions) ([]ServiceState, error) {
	start := time.Now()
	ctrs, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: cleanup.ProjectFilter(p.Name)})
	if err != nil {
		return nil, fmt.Errorf("wait for project %s: list containers: %w", p.Name, err)
	}
	byService := map[string]string{}
	for _, c := range ctrs {
		byService[c.Labels[labels.ComposeServiceLabel]] = c.ID
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name, s := range p.Services {
			if s.GetScale() > 0 && !yield(name) {
				return
			}
		}
	})
	states := make([]ServiceState, len(names))
	for i, name := range names {
		states[i] = ServiceState{Service: name, ContainerID: byService[name], State: "missing"}
		if states[i].ContainerID == "" {
			return states, e.notReady(ctx, p.Name, "missing", start, opts.Timeout, states)
		}
	}
	budget := opts.Timeout
	checks := make([]*readiness, len(states))
	for i := range states {
		r, err := e.newReadiness(ctx, &states[i], opts)
		if err != nil {
			return states, err
		}
		checks[i] = r
		if opts.Timeout <= 0 {
			budget = max(budget, r.budget)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var (
		mu     sync.Mutex
		reason string
		wg     sync.WaitGroup
	)
	for _, r := range checks {
		wg.Go(func() {
			if why := r.await(wctx); why != "" {
				mu.Lock()
				if reason == "" {
					reason = why
				}
				mu.Unlock()
				cancel() // one failure fails the sample: stop waiting for the others
			}
		})
	}
	wg.Wait()
	switch {
	case reason != "" && reason != "stopped":
		return states, e.notReady(ctx, p.Name, reason, start, budget, states)
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return states, fmt.Errorf("wait for project %s: %w", p.Name, ctx.Err())
	case wctx.Err() != nil:
		return states, e.notReady(ctx, p.Name, "timeout", start, budget, states)
	}
	return states, nil
}

// readiness watches one container until it is ready or fails.
type readiness struct {
	e        *Engine
	s        *ServiceState
	interval time.Duration
	budget   time.Duration
	// probe is the healthcheck's test as an argv, nil without a healthcheck or with probing off.
	probe        []string
	probeTimeout time.Duration
	probeMax     time.Duration
	onReady      func(ServiceState)
	reported     bool
	// firstRunning is when a poll first found the container running. A service without a
	// healthcheck counts as ready only when a poll at least minStableUptime later still finds
	// it running, so that one crashing on start fails the wait instead of passing: the engine
	// goes on reporting a crashed container as running for a while, longer on a loaded host.
	firstRunning time.Time
}

func (r *readiness) ready() string {
	if r.onReady != nil && !r.reported {
		r.reported = true
		r.onReady(*r.s)
	}
	return ""
}

func (e *Engine) newReadiness(ctx context.Context, s *ServiceState, opts WaitOptions) (*readiness, error) {
	info, err := e.api.ContainerInspect(ctx, s.ContainerID)
	if err != nil {
		return nil, fmt.Errorf("wait for %s: inspect: %w", s.Service, err)
	}
	s.Container = strings.TrimPrefix(info.Name, "/")
	s.WorkingDir, s.User = info.Config.WorkingDir, info.Config.User
	if s.WorkingDir == "" {
		s.WorkingDir = "/"
	}
	r := &readiness{e: e, s: s, interval: opts.Interval, budget: Budget(info.Config.Healthcheck), onReady: opts.OnReady}
	if r.interval <= 0 {
		r.interval = DefaultPollInterval
	}
	if hc := info.Config.Healthcheck; !opts.NoProbe && hc != nil {
		r.probe = probeArgv(hc.Test)
		r.probeTimeout = cmp.Or(hc.Timeout, defaultHealthTimeout)
		// Back off to the healthcheck's interval at most, and never past 2 s: a probe is an
		// exec (about 35 ms of engine time), and hundreds of starting services share the daemon.
		r.probeMax = min(cmp.Or(hc.Interval, defaultHealthInterval), 2*time.Second)
	}
	observe(s, &r.firstRunning, info)
	return r, nil
}

// probeArgv turns a healthcheck test into an argv: CMD runs as given, CMD-SHELL through
// /bin/sh -c, as Docker does.
func probeArgv(test []string) []string {
	if len(test) == 0 {
		return nil
	}
	switch test[0] {
	case "CMD":
		return test[1:]
	case "CMD-SHELL":
		return []string{"/bin/sh", "-c", strings.Join(test[1:], " ")}
	}
	return nil
}

// await returns "" once the container is ready, the failure ("unhealthy", "exited") when it
// fails, and "stopped" when ctx ends first.
//
// A container that runs with a healthcheck still "starting" is looked at once per probe, just
// before it: the probe is what makes it ready, and an inspect every poll interval on top of it
// would cost the daemon twenty inspects a second per container while a loaded host keeps the
// probes failing. A probe the engine could not run (the container stopped under it) is followed
// by a look at once, so that a crash still fails the wait without waiting for the next probe.
// Everything else (a container not started yet, one without a healthcheck or with probing off)
// is polled every interval.
func (r *readiness) await(ctx context.Context) string {
	s := r.s
	// The first probe goes at once; each failure doubles the wait, from the poll interval.
	backoff := DefaultPollInterval
	nextProbe := time.Now()
	timer := time.NewTimer(r.interval)
	defer timer.Stop()
	for {
		// s holds the latest observation (newReadiness made the first).
		switch {
		case s.Ready:
			return r.ready()
		case s.Health == "unhealthy":
			return "unhealthy"
		case (s.State == "exited" && s.ExitCode != 0) || s.State == "dead":
			return "exited"
		}
		wait := r.interval
		if r.probe != nil && s.State == "running" && s.Health == "starting" {
			ran := true
			if !time.Now().Before(nextProbe) {
				var ok bool
				if ok, ran = r.runProbe(ctx); ok {
					s.Ready = true
					return r.ready()
				}
				nextProbe = time.Now().Add(backoff)
				backoff = min(2*backoff, r.probeMax)
			}
			wait = max(time.Until(nextProbe), 0)
			if !ran {
				wait = 0
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return "stopped"
		case <-timer.C:
		}
		info, err := r.e.api.ContainerInspect(ctx, s.ContainerID)
		if err != nil {
			if ctx.Err() != nil {
				return "stopped"
			}
			s.State = "missing"
			return "exited"
		}
		observe(s, &r.firstRunning, info)
	}
}

// runProbe runs the healthcheck's test once. ok is its verdict; ran is false when the engine
// could not run it at all (the container stopped, say), which the command's own failure is not.
func (r *readiness) runProbe(ctx context.Context) (ok, ran bool) {
	res, err := sandboxio.Exec(ctx, sandboxio.Target{Client: r.e.api, Container: r.s.ContainerID, User: r.s.User},
		sandboxio.ExecRequest{Cmd: r.probe, Timeout: r.probeTimeout, OutputLimit: 4096})
	if err != nil {
		return false, false
	}
	if res.ExitCode != 0 {
		r.s.HealthOutput = res.StdoutText() + res.StderrText()
		return false, true
	}
	return true, true
}

func observe(s *ServiceState, firstRunning *time.Time, info container.InspectResponse) {
	st := info.State
	if st == nil {
		return
	}
	s.State, s.ExitCode, s.OOMKilled = st.Status, st.ExitCode, st.OOMKilled
	s.Health = ""
	if st.Health != nil {
		s.Health = st.Health.Status
		if out, ok := lastProbeOutput(st.Health.Log); ok {
			s.HealthOutput = out
		}
	}
	switch {
	case st.Status == "running" && !st.Restarting:
		if s.Health == "" {
			if firstRunning.IsZero() {
				*firstRunning = time.Now()
			}
			s.Ready = time.Since(*firstRunning) >= minStableUptime
		} else {
			s.Ready = s.Health == "healthy"
		}
	case st.Status == "exited" && st.ExitCode == 0:
		s.Ready = true // a one-shot init container that finished its job
	}
}

// notReady builds the failure report, reading every not-ready service's log tail on a
// detached context so that a cancelled caller still gets diagnostics.
func (e *Engine) notReady(ctx context.Context, project, reason string, start time.Time, budget time.Duration, states []ServiceState) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := &NotReadyError{Project: project, Reason: reason, Waited: time.Since(start), Budget: budget}
	for _, s := range states {
		if s.Ready {
			continue
		}
		if s.ContainerID != "" {
			if info, ierr := e.api.ContainerInspect(dctx, s.ContainerID); ierr == nil {
				observe(&s, new(time.Time), info)
				s.Container = strings.TrimPrefix(info.Name, "/")
			}
			if s.State == "running" && s.Health == "" {
				continue // running without a healthcheck: fine, merely not confirmed yet
			}
			s.Logs = e.logTail(dctx, s.ContainerID, logTailLines)
		}
		err.Services = append(err.Services, s)
	}
	return err
}

func (e *Engine) logTail(ctx context.Context, id string, lines int) string {
	rc, err := e.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(lines)})
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	defer rc.Close()
	// One buffer for both streams keeps their interleaving.
	var buf bytes.Buffer
	if _, err := stdcopy.StdCopy(&buf, &buf, rc); err != nil {
		return buf.String() + "(logs cut short: " + err.Error() + ")"
	}
	return buf.String()
}

// minStableUptime is how long a service without a healthcheck must be seen running before it
// counts as ready.
const minStableUptime = 250 * time.Millisecond

// lastProbeOutput picks the healthcheck output worth showing: the latest probe that ran to
// its end, since a probe that timed out (exit code -1) says only that it timed out; failing
// that, the latest probe.
func lastProbeOutput(log []*container.HealthcheckResult) (string, bool) {
	for i := len(log) - 1; i >= 0; i-- {
		if log[i] != nil && log[i].ExitCode >= 0 && log[i].Output != "" {
			return log[i].Output, true
		}
	}
	if n := len(log); n > 0 && log[n-1] != nil {
		return log[n-1].Output, true
	}
	return "", false
}
