package lifecycle

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/egressgw"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
)

// EgressState is a sample's allowlist and what its gateway refused.
type EgressState struct {
	// Allow is the list every service has, once SetEgress has set one; Services the lists
	// services started with, before any SetEgress.
	Allow    []string
	Services map[string][]string
	// Ceiling is the task's --egress the sample started with: what SetEgress may allow at most.
	Ceiling []string
	Denials []egressgw.Denial
}

// egressGateway finds the project's gateway container.
func (e *Engine) egressGateway(ctx context.Context, project string) (container.Summary, error) {
	list, err := e.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", labels.ComposeProjectLabel+"="+project),
		filters.Arg("label", labels.ComposeServiceLabel+"="+EgressGatewayService))})
	if err != nil {
		return container.Summary{}, fmt.Errorf("egress of %s: %w", project, err)
	}
	if len(list) == 0 {
		return container.Summary{}, cbxerr.New(cbxerr.ErrNotFound, fmt.Sprintf("egress of %s: the sample has no egress allowlist (start it with --egress)", project))
	}
	return list[0], nil
}

// Egress reads the sample's allowlist and its gateway's denials.
func (e *Engine) Egress(ctx context.Context, project string) (EgressState, error) {
	gw, err := e.egressGateway(ctx, project)
	if err != nil {
		return EgressState{}, err
	}
	var st EgressState
	if rc, _, err := e.api.CopyFromContainer(ctx, gw.ID, EgressAllowFile); err == nil {
		tr := tar.NewReader(rc)
		if _, err := tr.Next(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(tr, 1<<20))
			st.Allow = strings.Fields(string(b))
			if st.Allow == nil {
				st.Allow = []string{}
			}
		}
		rc.Close()
	}
	ins, err := e.api.ContainerInspect(ctx, gw.ID)
	if err != nil {
		return st, fmt.Errorf("egress of %s: %w", project, err)
	}
	started := egressgw.StartedWith(ins.Args)
	st.Ceiling = started.Ceiling
	if st.Allow == nil {
		st.Services = started.Services
	}
	logs, err := e.api.ContainerLogs(ctx, gw.ID, container.LogsOptions{ShowStdout: true})
	if err != nil {
		return st, fmt.Errorf("egress of %s: read the gateway's log: %w", project, err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, io.Discard, logs); err != nil {
		return st, fmt.Errorf("egress of %s: read the gateway's log: %w", project, err)
	}
	err = egressgw.ReadLog(&out, func(d egressgw.Denial) { st.Denials = append(st.Denials, d) }, nil)
	return st, err
}

// WatchEgress follows the sample's gateway log and calls fn with each denial, from the first,
// until ctx ends or the gateway's log ends (the gateway stopped); either returns nil.
func (e *Engine) WatchEgress(ctx context.Context, project string, fn func(egressgw.Denial)) error {
	gw, err := e.egressGateway(ctx, project)
	if err != nil {
		return err
	}
	logs, err := e.api.ContainerLogs(ctx, gw.ID, container.LogsOptions{ShowStdout: true, Follow: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watch egress of %s: follow the gateway's log: %w", project, err)
	}
	defer logs.Close()
	pr, pw := io.Pipe()
	go func() {
		// The gateway runs without a TTY: its log is the engine's multiplexed stream.
		_, err := stdcopy.StdCopy(pw, io.Discard, logs)
		pw.CloseWithError(err)
	}()
	stop := context.AfterFunc(ctx, func() { logs.Close() })
	defer stop()
	err = egressgw.ReadLog(pr, fn, nil)
	pr.Close()
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("watch egress of %s: read the gateway's log: %w", project, err)
	}
	return nil
}

// SetEgress replaces the allowlist of every service of a live sample with allow (empty: reach
// nothing). Ports the gateway was not started with stay closed.
func (e *Engine) SetEgress(ctx context.Context, project string, allow []string) error {
	list, err := egressgw.ParseAllowlist(allow)
	if err != nil {
		return fmt.Errorf("set egress of %s: %w", project, err)
	}
	gw, err := e.egressGateway(ctx, project)
	if err != nil {
		return err
	}
	body := []byte(strings.Join(list.Strings(), "\n") + "\n")
	gen := []byte(fmt.Sprintf("%d\n", time.Now().UnixNano()))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "allow", Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()})
	_, _ = tw.Write(body)
	_ = tw.WriteHeader(&tar.Header{Name: "allow.generation", Mode: 0o644, Size: int64(len(gen)), ModTime: time.Now()})
	_, _ = tw.Write(gen)
	_ = tw.Close()
	dir := EgressAllowFile[:strings.LastIndex(EgressAllowFile, "/")]
	if err := e.api.CopyToContainer(ctx, gw.ID, dir, &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("set egress of %s: %w", project, err)
	}
	// The gateway applies the list on SIGHUP, and logs the generation once it did: SetEgress
	// returns only then, so that what the sample does next meets the new list.
	wctx, cancel := context.WithTimeout(ctx, egressSetTimeout)
	defer cancel()
	logs, err := e.api.ContainerLogs(wctx, gw.ID, container.LogsOptions{ShowStdout: true, Follow: true})
	if err != nil {
		return fmt.Errorf("set egress of %s: follow the gateway's log: %w", project, err)
	}
	defer logs.Close()
	stop := context.AfterFunc(wctx, func() { logs.Close() })
	defer stop()
	if err := e.api.ContainerKill(ctx, gw.ID, "HUP"); err != nil {
		return fmt.Errorf("set egress of %s: signal the gateway: %w", project, err)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, logs)
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	want := strings.TrimSpace(string(gen))
	applied := false
	_ = egressgw.ReadLog(pr, nil, func(g string) bool { applied = g == want; return applied })
	if applied {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("set egress of %s: %w", project, ctx.Err())
	}
	return cbxerr.New(cbxerr.ErrUnavailable, fmt.Sprintf("set egress of %s: the gateway did not apply the list within %s (is it running?)", project, egressSetTimeout))
}

// egressSetTimeout bounds how long SetEgress waits for the gateway to apply a list.
const egressSetTimeout = 30 * time.Second
