package k8stest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/composebox/composebox/internal/testutil"
)

// TestClusterSmoke proves the local cluster does what composebox's Kubernetes tests rely on: an
// image built FROM scratch and pushed by Docker runs as a pod, exec works, a headless Service's
// name resolves through the pods' DNS, and NetworkPolicy is enforced (a deny-all drops traffic
// that an allow rule then lets through, for the allowed pod only).
func TestClusterSmoke(t *testing.T) {
	env := Load(t)
	cfg, cs := env.Client(t)
	docker := testutil.Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	ref := PushImage(t, docker, env, testutil.BaseImage(t), "smoke")
	ns := Namespace(t, cs)

	pod := func(name string, lbls map[string]string, cmd ...string) *corev1.Pod {
		all := Labels(t)
		for k, v := range lbls {
			all[k] = v
		}
		grace := int64(0)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{
					Name: "main", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent, Command: cmd,
				}},
			},
		}
	}
	pods := []*corev1.Pod{
		pod("server", map[string]string{"app": "server"},
			"sh", "-c", "mkdir -p /www && echo hello-from-server >/www/index.html && exec httpd -f -p 8080 -h /www"),
		guaranteed(pod("client", map[string]string{"role": "client"}, "sleep", "3600")),
		pod("other", nil, "sleep", "3600"),
	}
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Labels: Labels(t)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": "server"},
			Ports:     []corev1.ServicePort{{Name: "http", Port: 8080}},
		},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	var serverIP string
	for _, p := range pods {
		start := time.Now()
		ready, err := WaitPodReady(ctx, cs, ns, p.Name)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		t.Logf("pod %s ready after %v at %s", p.Name, time.Since(start).Round(time.Millisecond), ready.Status.PodIP)
		if p.Name == "server" {
			serverIP = ready.Status.PodIP
		}
	}

	exec := func(pod string, cmd ...string) ExecResult {
		t.Helper()
		res, err := Exec(ctx, cfg, cs, ns, pod, cmd...)
		if err != nil {
			t.Fatalf("exec %v in %s: %v", cmd, pod, err)
		}
		return res
	}
	if res := exec("client", "sh", "-c", "echo out; echo err >&2; exit 3"); res.Stdout != "out\n" ||
		res.Stderr != "err\n" || res.ExitCode != 3 {
		t.Fatalf("exec: got %+v, want stdout out, stderr err, exit 3", res)
	}
	// A Guaranteed pod starts (its runtime may not lower oom_score_adj here) and its memory
	// limit applies.
	if res := exec("client", "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"); res.Stdout != "67108864\n" {
		t.Fatalf("client's memory limit: got %+v, want 67108864", res)
	}

	// The headless Service's short name resolves, through the namespace's search path, to the
	// server pod's own address. busybox's nslookup tries every search domain and exits 1 when
	// any of them is NXDOMAIN, so its answer is read, not its exit code.
	want := "Name:\tserver." + ns + ".svc.cluster.local\nAddress: " + serverIP + "\n"
	if err := Poll(ctx, 30*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(exec("client", "nslookup", "server").Stdout, want), nil
	}); err != nil {
		t.Fatalf("server does not resolve to %s: %v (last: %+v)", serverIP, err, exec("client", "nslookup", "server"))
	}

	// A real request, not a bare connect: the answer must be the server's page. busybox's
	// `wget -T` crashes, so `timeout` bounds a request whose packets are dropped.
	fetch := func(from string) ExecResult {
		return exec(from, "timeout", "-s", "KILL", "3", "wget", "-q", "-O", "-", "http://server:8080/")
	}
	reaches := func(from string) bool {
		res := fetch(from)
		return res.ExitCode == 0 && res.Stdout == "hello-from-server\n"
	}
	for _, from := range []string{"client", "other"} {
		if res := fetch(from); res.ExitCode != 0 || res.Stdout != "hello-from-server\n" {
			t.Fatalf("before any policy, %s cannot fetch from server: %+v", from, res)
		}
	}

	policy := func(name string, ingress []networkingv1.NetworkPolicyIngressRule) {
		t.Helper()
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: Labels(t)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     ingress,
			},
		}
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create network policy %s: %v", name, err)
		}
	}
	policy("deny-all", nil)
	if err := Poll(ctx, 30*time.Second, func(context.Context) (bool, error) {
		return !reaches("client") && !reaches("other"), nil
	}); err != nil {
		t.Fatalf("deny-all is not enforced: client %+v, other %+v", fetch("client"), fetch("other"))
	}

	policy("allow-client", []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
		}},
	}})
	if err := Poll(ctx, 30*time.Second, func(context.Context) (bool, error) {
		return reaches("client"), nil
	}); err != nil {
		t.Fatalf("allow-client does not let client through: %+v", fetch("client"))
	}
	if res := fetch("other"); res.ExitCode == 0 || strings.Contains(res.Stdout, "hello") {
		t.Fatalf("a pod allow-client does not select reached the server: %+v", res)
	}
	checkNodeVersion(ctx, t, cs)
}

// guaranteed gives p's containers equal requests and limits (64 MiB, 100m CPU).
func guaranteed(p *corev1.Pod) *corev1.Pod {
	rl := corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("64Mi"),
		corev1.ResourceCPU:    resource.MustParse("100m"),
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	return p
}

// checkNodeVersion guards the version stamp: an unstamped build reports a development version.
func checkNodeVersion(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("got %d nodes, want the one local node", len(nodes.Items))
	}
	if v := nodes.Items[0].Status.NodeInfo.KubeletVersion; !strings.HasPrefix(v, "v1.") || strings.Contains(v, "0.0.0") {
		t.Fatalf("kubelet reports version %q, want a release", v)
	}
}

// The documented ClusterRole is enough for a sample's objects and no more: the account it
// is bound to may create a namespace and pods in it, and may not read secrets or grant
// itself more.
func TestServiceAccountHasTheDocumentedPrivilegesOnly(t *testing.T) {
	env := Load(t)
	cfg := env.ServiceAccount(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cbx-test-sa-", Labels: Labels(t)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace as the service account: %v", err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: %v, want forbidden", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("bind cluster-admin: %v, want forbidden", err)
	}
	// Nodes are read (their addresses are denied to samples), never changed, and the
	// kubelet's API behind them stays out of reach.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("list nodes: %v", err)
	}
	node := nodes.Items[0].Name
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patch node %s: %v, want forbidden", node, err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get node %s: %v, want forbidden", node, err)
	}
	if err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/configz").Do(ctx).Error(); !apierrors.IsForbidden(err) {
		t.Errorf("the kubelet's API through nodes/proxy: %v, want forbidden", err)
	}
}
