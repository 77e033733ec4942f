package multiengine

import (
	"context"
	"io"

	"github.com/composebox/composebox/orchestrator/backend"
)

// Sandbox I/O goes to the engine of the container. Its errors keep their own words, but for a
// lost engine, which they name.

func (b *Backend) Exec(ctx context.Context, t backend.Target, req backend.ExecRequest) (backend.ExecResult, error) {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return backend.ExecResult{}, err
	}
	res, err := m.b.Exec(ctx, t, req)
	return res, m.wrapLost(err)
}

func (b *Backend) ExecDetached(ctx context.Context, t backend.Target, req backend.ExecRequest) (string, error) {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return "", err
	}
	x, err := optional[backend.DetachedExecer](m, "exec detached", "backend.DetachedExecer")
	if err != nil {
		return "", err
	}
	id, err := x.ExecDetached(ctx, t, req)
	return id, m.wrapLost(err)
}

func (b *Backend) ExecStream(ctx context.Context, t backend.Target, req backend.ExecRequest) (*backend.Process, error) {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return nil, err
	}
	p, err := m.b.ExecStream(ctx, t, req)
	return p, m.wrapLost(err)
}

func (b *Backend) ReadFile(ctx context.Context, t backend.Target, path string, limit int64) ([]byte, error) {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return nil, err
	}
	data, err := backend.ReadFile(ctx, m.b, t, path, limit)
	return data, m.wrapLost(err)
}

func (b *Backend) ReadFileTo(ctx context.Context, t backend.Target, path string, w io.Writer, limit int64) (int64, error) {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return 0, err
	}
	n, err := m.b.ReadFileTo(ctx, t, path, w, limit)
	return n, m.wrapLost(err)
}

func (b *Backend) WriteFile(ctx context.Context, t backend.Target, path string, data []byte) error {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return err
	}
	return m.wrapLost(backend.WriteFile(ctx, m.b, t, path, data))
}

func (b *Backend) WriteFileFrom(ctx context.Context, t backend.Target, path string, r io.Reader, size int64) error {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return err
	}
	return m.wrapLost(m.b.WriteFileFrom(ctx, t, path, r, size))
}

func (b *Backend) ReadDirTo(ctx context.Context, t backend.Target, path string, w io.Writer) error {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return err
	}
	return m.wrapLost(m.b.ReadDirTo(ctx, t, path, w))
}

func (b *Backend) WriteDirFrom(ctx context.Context, t backend.Target, path string, r io.Reader) error {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return err
	}
	return m.wrapLost(m.b.WriteDirFrom(ctx, t, path, r))
}

func (b *Backend) Inspect(ctx context.Context, container string) (backend.ContainerInfo, error) {
	m, err := b.containerMember(ctx, container)
	if err != nil {
		return backend.ContainerInfo{}, err
	}
	info, err := m.b.Inspect(ctx, container)
	return info, m.wrapLost(err)
}

func (b *Backend) Diagnose(ctx context.Context, t backend.Target) (backend.Diagnosis, error) {
	m, err := b.containerMember(ctx, t.Container)
	if err != nil {
		return backend.Diagnosis{}, err
	}
	x, err := optional[backend.Diagnoser](m, "diagnose", "backend.Diagnoser")
	if err != nil {
		return backend.Diagnosis{}, err
	}
	d, err := x.Diagnose(ctx, t)
	return d, m.wrapLost(err)
}

func (b *Backend) Logs(ctx context.Context, container string, opts backend.LogsOptions) error {
	m, err := b.containerMember(ctx, container)
	if err != nil {
		return err
	}
	return m.wrapLost(m.b.Logs(ctx, container, opts))
}

// ShellCommand is the command of the container's engine, which says how to reach it.
func (b *Backend) ShellCommand(c backend.ContainerInfo, user, shell string) string {
	b.mu.Lock()
	m := b.containers[c.ID]
	b.mu.Unlock()
	if m == nil {
		m = b.members[0]
	}
	if s, ok := backend.AsShell(m.b); ok {
		return s.ShellCommand(c, user, shell)
	}
	return ""
}
