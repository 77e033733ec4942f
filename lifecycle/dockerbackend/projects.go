package dockerbackend

import (
	"context"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Up is lifecycle's Up.
func (b *Backend) Up(ctx context.Context, p *types.Project, opts backend.UpOptions) error {
	return b.engine.Up(ctx, p, lifecycle.UpOptions{Wait: waitOptions(opts.Wait), OnProgress: opts.OnProgress, HostAccess: opts.HostAccess, HostRoutes: opts.HostRoutes})
}

// Wait is lifecycle's Wait.
func (b *Backend) Wait(ctx context.Context, p *types.Project, opts backend.WaitOptions) ([]backend.ServiceState, error) {
	states, err := b.engine.Wait(ctx, p, waitOptions(opts))
	out := make([]backend.ServiceState, len(states))
	for i, st := range states {
		out[i] = serviceState(st)
	}
	return out, err
}

// Down removes the project by labels alone (cleanup.RemoveProject): the one teardown.
func (b *Backend) Down(ctx context.Context, project string, opts backend.DownOptions) (backend.Removed, error) {
	return b.engine.Down(ctx, project, lifecycle.DownOptions{Grace: opts.Grace})
}

func waitOptions(o backend.WaitOptions) lifecycle.WaitOptions {
	w := lifecycle.WaitOptions{Timeout: o.Timeout}
	if o.OnReady != nil {
		w.OnReady = func(st lifecycle.ServiceState) { o.OnReady(serviceState(st)) }
	}
	return w
}

func serviceState(st lifecycle.ServiceState) backend.ServiceState {
	return backend.ServiceState{Service: st.Service, ContainerID: st.ContainerID, Container: st.Container, State: st.State,
		Health: st.Health, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled, Ready: st.Ready, Logs: st.Logs,
		WorkingDir: st.WorkingDir, User: st.User}
}
