package dockerbackend

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/composebox/composebox/lifecycle/sandboxio"
	"github.com/composebox/composebox/orchestrator/backend"
)

// target is t on the raw client: an exec is never retried implicitly.
func (b *Backend) target(t backend.Target) sandboxio.Target {
	return sandboxio.Target{Client: b.raw, Container: t.Container, Service: t.Service, WorkingDir: t.WorkingDir, User: t.User}
}

func (b *Backend) Exec(ctx context.Context, t backend.Target, req backend.ExecRequest) (backend.ExecResult, error) {
	return sandboxio.Exec(ctx, b.target(t), req)
}

func (b *Backend) ExecDetached(ctx context.Context, t backend.Target, req backend.ExecRequest) (string, error) {
	return sandboxio.ExecDetached(ctx, b.target(t), req)
}

func (b *Backend) ExecStream(ctx context.Context, t backend.Target, req backend.ExecRequest) (*backend.Process, error) {
	return sandboxio.ExecStream(ctx, b.target(t), req)
}

func (b *Backend) ReadFile(ctx context.Context, t backend.Target, path string, limit int64) ([]byte, error) {
	return sandboxio.ReadFile(ctx, b.target(t), path, limit)
}

func (b *Backend) ReadFileTo(ctx context.Context, t backend.Target, path string, w io.Writer, limit int64) (int64, error) {
	return sandboxio.ReadFileTo(ctx, b.target(t), path, w, limit)
}

func (b *Backend) WriteFile(ctx context.Context, t backend.Target, path string, data []byte) error {
	return sandboxio.WriteFile(ctx, b.target(t), path, data)
}

func (b *Backend) WriteFileFrom(ctx context.Context, t backend.Target, path string, r io.Reader, size int64) error {
	return sandboxio.WriteFileFrom(ctx, b.target(t), path, r, size)
}

func (b *Backend) ReadDirTo(ctx context.Context, t backend.Target, path string, w io.Writer) error {
	return sandboxio.ReadDirTo(ctx, b.target(t), path, w)
}

func (b *Backend) WriteDirFrom(ctx context.Context, t backend.Target, path string, r io.Reader) error {
	return sandboxio.WriteDirFrom(ctx, b.target(t), path, r)
}

func (b *Backend) Diagnose(ctx context.Context, t backend.Target) (backend.Diagnosis, error) {
	return sandboxio.Diagnose(ctx, b.target(t))
}

// Inspect describes a container; a removed one is ErrNotFound.
func (b *Backend) Inspect(ctx context.Context, id string) (backend.ContainerInfo, error) {
	info, err := b.raw.ContainerInspect(ctx, id)
	if err != nil {
		return backend.ContainerInfo{}, notFound(err, "container "+id)
	}
	ci := backend.ContainerInfo{ID: info.ID, Name: strings.TrimPrefix(info.Name, "/"), WorkingDir: "/"}
	if st := info.State; st != nil {
		ci.State, ci.Running = string(st.Status), st.Running
		ci.ExitCode, ci.OOMKilled = st.ExitCode, st.OOMKilled
		if st.Health != nil {
			ci.Health = string(st.Health.Status)
		}
	}
	if info.Config != nil {
		if info.Config.WorkingDir != "" {
			ci.WorkingDir = info.Config.WorkingDir
		}
		ci.User, ci.TTY = info.Config.User, info.Config.Tty
	}
	if info.NetworkSettings != nil {
		for port, bindings := range info.NetworkSettings.Ports {
			for _, pb := range bindings {
				hp, _ := strconv.Atoi(pb.HostPort)
				p := backend.Port{ContainerPort: port.Int(), Protocol: port.Proto(), HostIP: pb.HostIP, HostPort: hp}
				if !slices.Contains(ci.Ports, p) {
					ci.Ports = append(ci.Ports, p)
				}
			}
		}
	}
	slices.SortFunc(ci.Ports, func(a, b backend.Port) int {
		return cmp.Or(cmp.Compare(a.ContainerPort, b.ContainerPort), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.HostIP, b.HostIP))
	})
	return ci, nil
}

// ShellCommand is `docker [FLAGS] exec -it [--user USER] NAME SHELL`, FLAGS reaching an engine
// named explicitly.
func (b *Backend) ShellCommand(c backend.ContainerInfo, user, shell string) string {
	if user != "" {
		user = " --user " + user
	}
	docker := "docker"
	if b.shell != "" {
		docker += " " + b.shell
	}
	return fmt.Sprintf("%s exec -it%s %s %s", docker, user, c.Name, shell)
}

// Containers lists the containers carrying every label of sel.
func (b *Backend) Containers(ctx context.Context, sel []string, all bool) ([]backend.Container, error) {
	list, err := b.raw.ContainerList(ctx, container.ListOptions{All: all, Filters: labelFilter(sel)})
	if err != nil {
		return nil, err
	}
	out := make([]backend.Container, len(list))
	for i, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out[i] = backend.Container{ID: c.ID, Name: name, Engine: b.name, Labels: c.Labels, State: string(c.State), Status: c.Status}
	}
	return out, nil
}
