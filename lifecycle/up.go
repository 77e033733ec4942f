package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/compose/v2/pkg/compose"
	"github.com/docker/docker/api/types/container"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
)

// UpOptions configures Up. The zero value starts every service.
type UpOptions struct {
	// Services limits Up to these services (and their dependencies). Empty means all.
	Services []string
	// Wait configures the readiness checks of dependencies that must be healthy (or have
	// completed) before their dependents start.
	Wait WaitOptions
	// OnProgress, if set, receives each step of each service's container as compose takes
	// it: "creating", "created", "starting", "started" (others, such as "recreated", are
	// possible). It is called synchronously from compose's goroutines, possibly from several at
	// once, so it must be quick and must not block.
	OnProgress func(service, status string)
	// HostAccess leaves the project's networks open to the host's own addresses (the policy's
	// host-access). Without it every bridge network of the project gets the host firewall's
	// rule before any container starts, and a host where that cannot be done fails the Up
	// with ErrHostFirewall.
	HostAccess bool
	// HostRoutes lets the project's own subnets and fixed addresses overlap the host's routes
	// and addresses, or lie outside private address space (the policy's host-routes). Without
	// it such a project fails before any network exists, with a compose.PolicyError.
	HostRoutes bool
}

// createTimeout bounds the create phase, which runs detached from the caller's context.
const createTimeout = 2 * time.Minute

// Up creates and starts the project's containers, like `docker compose up -d` without --wait:
// readiness is Wait's job, because compose's own wait can return success when its deadline
// passes. The project must be normalised (compose labels on every service): the library does
// not add them itself. Images must exist locally; Up never builds.
//
// The create phase runs to completion even when ctx is cancelled: a create request the engine
// already accepted would otherwise land after the caller's teardown had listed the project, and
// leak. Cancellation takes effect before the start phase and during it.
//
// When a service depends on another being healthy (or having completed), composebox takes
// over the start order: compose starts one service at a time, and a dependent starts as soon
// as its dependencies pass composebox's readiness check (see Wait), instead of compose's
// 500 ms poll of Docker's own health status, which Engine 20.10 sets only after the first
// interval. The order itself stays compose's.
func (e *Engine) Up(ctx context.Context, p *types.Project, opts UpOptions) error {
	services := opts.Services
	if len(services) == 0 {
		services = p.ServiceNames()
	}
	if opts.OnProgress != nil {
		defer e.out.subscribe(p.Name, p.ServiceNames(), opts.OnProgress)()
	}
	if !opts.HostRoutes {
		if err := e.checkHostRoutes(ctx, p); err != nil {
			return fmt.Errorf("up project %s: %w", p.Name, err)
		}
	}
	restricted, err := prepareEgress(p)
	if err != nil {
		return fmt.Errorf("up project %s: %w", p.Name, err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	created, err := e.createNetworks(cctx, p)
	if err != nil {
		return fmt.Errorf("up project %s: %w", p.Name, err)
	}
	if len(restricted) > 0 {
		if err := e.addEgressGateway(cctx, p, restricted); err != nil {
			return fmt.Errorf("up project %s: %w", p.Name, err)
		}
		services = append(services, EgressGatewayService)
	}
	err = e.compose.Create(cctx, p, api.CreateOptions{
		Services:             services,
		Recreate:             api.RecreateDiverged,
		RecreateDependencies: api.RecreateDiverged,
		Inherit:              true,
		QuietPull:            true,
		AssumeYes:            true,
	})
	if err != nil && poolExhausted(err) {
		return addressPoolError(p.Name, err)
	}
	if err != nil {
		return fmt.Errorf("up project %s: create: %w", p.Name, err)
	}
	if !opts.HostAccess {
		// The containers exist but none has started: nothing has run in them yet.
		if err := e.protectNetworks(cctx, p, created); err != nil {
			return fmt.Errorf("up project %s: %w", p.Name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("up project %s: %w", p.Name, err)
	}
	if hasReadyConditions(p) {
		err = e.startInOrder(ctx, p, opts.Wait)
	} else {
		err = e.compose.Start(ctx, p.Name, api.StartOptions{Project: p, Services: services})
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("up project %s: start: %w", p.Name, err)
	}
	return nil
}

func hasReadyConditions(p *types.Project) bool {
	for _, s := range p.Services {
		for _, d := range s.DependsOn {
			if d.Condition == types.ServiceConditionHealthy || d.Condition == types.ServiceConditionCompletedSuccessfully {
				return true
			}
		}
	}
	return false
}

// startInOrder starts each service once its dependencies are ready by their condition, in
// compose's dependency order (independent services in parallel).
func (e *Engine) startInOrder(ctx context.Context, p *types.Project, wait WaitOptions) error {
	return compose.InDependencyOrder(ctx, p, func(ctx context.Context, name string) error {
		svc := p.Services[name]
		for dep, d := range svc.DependsOn {
			if _, ok := p.Services[dep]; !ok {
				continue // an optional dependency outside the active profiles
			}
			var err error
			switch d.Condition {
			case types.ServiceConditionHealthy:
				err = e.awaitService(ctx, p, dep, wait, false)
			case types.ServiceConditionCompletedSuccessfully:
				err = e.awaitService(ctx, p, dep, wait, true)
			}
			if err != nil {
				return err
			}
		}
		// Hand compose this service alone, without conditions: its dependencies are ready.
		svc.DependsOn = nil
		one := *p
		one.Services = types.Services{name: svc}
		return e.compose.Start(ctx, p.Name, api.StartOptions{Project: &one, Services: []string{name}})
	})
}

// awaitService waits until the service's container is ready (or, with exited, has exited 0).
// A failure is a *NotReadyError naming that service.
func (e *Engine) awaitService(ctx context.Context, p *types.Project, service string, opts WaitOptions, exited bool) error {
	start := time.Now()
	f := cleanup.ProjectFilter(p.Name)
	f.Add("label", labels.ComposeServiceLabel+"="+service)
	list, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil || len(list) == 0 {
		return fmt.Errorf("await %s: no container (%v)", service, err)
	}
	s := ServiceState{Service: service, ContainerID: list[0].ID}
	r, err := e.newReadiness(ctx, &s, opts)
	if err != nil {
		return err
	}
	budget := cmp.Or(opts.Timeout, r.budget)
	wctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for {
		why := r.await(wctx)
		switch {
		case why == "" && exited && s.State != "exited":
			// Running (or healthy) is not enough: wait for it to finish.
			s.Ready, r.reported = false, false
			continue
		case why == "":
			return nil
		case why == "stopped" && ctx.Err() != nil:
			return ctx.Err()
		case why == "stopped":
			why = "timeout"
		}
		return e.notReady(ctx, p.Name, why, start, budget, []ServiceState{s})
	}
}
