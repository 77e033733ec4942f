package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/internal/egressgw"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// A sample's allowlist and its denials live in its gateways (egressgateway.go), as on Docker:
// the list a gateway started with is in its arguments, the one SetEgress set in its allow
// file, and every refusal is an egress_denied line of its log. There is no signal API on a
// cluster: SetEgress execs `composebox __egress-allow --set` in each gateway's container,
// which writes the file and signals the gateway, and waits for the gateway's egress_set line.

var (
	_ backend.Egress        = (*Backend)(nil)
	_ backend.EgressWatcher = (*Backend)(nil)
)

// egressSetTimeout bounds how long SetEgress waits for a gateway to apply a list.
const egressSetTimeout = 30 * time.Second

// gateways are the project's gateway pods, by name.
func (b *Backend) gateways(ctx context.Context, op, project string) ([]corev1.Pod, error) {
	list, err := b.cs.CoreV1().Pods(project).List(ctx, listOpts(gatewayLabel))
	if err != nil {
		return nil, fmt.Errorf("%s of %s: list the egress gateways: %w", op, project, err)
	}
	if len(list.Items) == 0 {
		return nil, errdefs.New(errdefs.ErrNotFound, fmt.Sprintf("%s of %s: the sample has no egress allowlist (start it with --egress)", op, project))
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// gatewayExec runs the gateway's own binary with args in its container and returns its output.
func (b *Backend) gatewayExec(ctx context.Context, pod *corev1.Pod, args ...string) ([]byte, error) {
	var out, errb bytes.Buffer
	code, err := b.stream(ctx, pod.Namespace+"/"+pod.Name, append([]string{gatewayBinary}, args...), nil, &out, &errb, false, nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), err
}

// Egress reads the sample's allowlist and its gateways' denials.
func (b *Backend) Egress(ctx context.Context, project string) (backend.EgressState, error) {
	st := backend.EgressState{Denials: []backend.EgressDenial{}}
	pods, err := b.gateways(ctx, "egress", project)
	if err != nil {
		return st, err
	}
	for i := range pods {
		pod := &pods[i]
		out, err := b.gatewayExec(ctx, pod, "__egress-allow", "--file", gatewayAllowFile)
		if err != nil {
			return st, fmt.Errorf("egress of %s: read the allow file of %s: %w", project, pod.Name, err)
		}
		var file struct {
			Set   bool     `json:"set"`
			Allow []string `json:"allow"`
		}
		if err := json.Unmarshal(out, &file); err != nil {
			return st, fmt.Errorf("egress of %s: read the allow file of %s: %w", project, pod.Name, err)
		}
		started := egressgw.StartedWith(pod.Spec.Containers[0].Args)
		st.Ceiling = started.Ceiling
		if file.Set {
			st.Allow = append([]string{}, file.Allow...)
		} else {
			if st.Services == nil {
				st.Services = map[string][]string{}
			}
			maps.Copy(st.Services, started.Services)
		}
		logs, err := b.cs.CoreV1().Pods(project).GetLogs(pod.Name, &corev1.PodLogOptions{}).Stream(ctx)
		if err != nil {
			return st, fmt.Errorf("egress of %s: read the log of %s: %w", project, pod.Name, err)
		}
		err = readGatewayLog(logs, func(d backend.EgressDenial) { st.Denials = append(st.Denials, d) }, nil)
		logs.Close()
		if err != nil {
			return st, fmt.Errorf("egress of %s: read the log of %s: %w", project, pod.Name, err)
		}
	}
	slices.SortStableFunc(st.Denials, func(a, b backend.EgressDenial) int { return a.Time.Compare(b.Time) })
	return st, nil
}

// readGatewayLog calls denied with each egress_denied line of a gateway's log and set with the
// generation of each egress_set line (either may be nil), until the log ends.
func readGatewayLog(r io.Reader, denied func(backend.EgressDenial), set func(generation string) bool) error {
	var onDenied func(egressgw.Denial)
	if denied != nil {
		onDenied = func(d egressgw.Denial) {
			denied(backend.EgressDenial{Time: d.Time, Service: d.Service, Client: d.Client,
				Name: d.Name, Address: d.Address, Port: d.Port, Protocol: d.Protocol, Reason: d.Reason})
		}
	}
	return egressgw.ReadLog(r, onDenied, set)
}

// SetEgress replaces the allowlist of every service of a live sample with allow (empty: reach
// nothing), and returns once every gateway applied it. Ports a gateway was not started with
// stay closed.
func (b *Backend) SetEgress(ctx context.Context, project string, allow []string) error {
	list, err := egressgw.ParseAllowlist(allow)
	if err != nil {
		return fmt.Errorf("set egress of %s: %w", project, err)
	}
	pods, err := b.gateways(ctx, "set egress", project)
	if err != nil {
		return err
	}
	gen := fmt.Sprint(time.Now().UnixNano())
	for i := range pods {
		if err := b.setGateway(ctx, &pods[i], gen, list.Strings()); err != nil {
			return err
		}
	}
	return nil
}

// setGateway has one gateway apply a list: it follows the gateway's log from now, execs the
// write, and waits for the egress_set line with the generation.
func (b *Backend) setGateway(ctx context.Context, pod *corev1.Pod, gen string, specs []string) error {
	wctx, cancel := context.WithTimeout(ctx, egressSetTimeout)
	defer cancel()
	since := metav1.NewTime(time.Now().Add(-time.Second))
	logs, err := b.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Follow: true, SinceTime: &since}).Stream(wctx)
	if err != nil {
		return fmt.Errorf("set egress of %s: follow the log of %s: %w", pod.Namespace, pod.Name, err)
	}
	defer logs.Close()
	applied := make(chan error, 1)
	go func() {
		found := false
		err := readGatewayLog(logs, nil, func(g string) bool { found = g == gen; return found })
		if err == nil && !found {
			err = io.ErrUnexpectedEOF
		}
		applied <- err
	}()
	args := append([]string{"__egress-allow", "--set", "--file", gatewayAllowFile, "--generation", gen, "--"}, specs...)
	if _, err := b.gatewayExec(wctx, pod, args...); err != nil {
		return fmt.Errorf("set egress of %s: write the list of %s: %w", pod.Namespace, pod.Name, err)
	}
	select {
	case err := <-applied:
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("set egress of %s: %w", pod.Namespace, ctx.Err())
		}
	case <-wctx.Done():
		if ctx.Err() != nil {
			return fmt.Errorf("set egress of %s: %w", pod.Namespace, ctx.Err())
		}
	}
	return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("set egress of %s: gateway %s did not apply the list within %s (is it running?)", pod.Namespace, pod.Name, egressSetTimeout))
}

// WatchEgress follows the sample's gateways' logs and calls fn with each denial, from the
// first, until ctx ends or every gateway's log ends; either returns nil.
func (b *Backend) WatchEgress(ctx context.Context, project string, fn func(backend.EgressDenial)) error {
	pods, err := b.gateways(ctx, "watch egress", project)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(pods))
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs, err := b.cs.CoreV1().Pods(project).GetLogs(pods[i].Name, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
			if err != nil {
				if ctx.Err() == nil {
					errs[i] = fmt.Errorf("watch egress of %s: follow the log of %s: %w", project, pods[i].Name, err)
				}
				return
			}
			defer logs.Close()
			stop := context.AfterFunc(ctx, func() { logs.Close() })
			defer stop()
			err = readGatewayLog(logs, func(d backend.EgressDenial) {
				mu.Lock()
				defer mu.Unlock()
				fn(d)
			}, nil)
			if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
				errs[i] = fmt.Errorf("watch egress of %s: read the log of %s: %w", project, pods[i].Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
