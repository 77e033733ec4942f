package kubernetes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// fetchScript asks "$1":80 for / with one connect bounded to 3 s and prints the body's last
// line; nothing when nothing answered.
const fetchScript = `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$1" 80 | tail -n 1`

// Compose networks hold on the cluster (kube-router enforces the policies): services reach
// each other only across a network they share, nothing outside the sample reaches in, a
// service on internal networks alone reaches its peers (by name: DNS works) and nothing
// outside, and one with network_mode none reaches nothing. Every allowed path is retried
// until a deadline (the plugin applies policies asynchronously); every denied one is a
// single bounded attempt made after an allowed one from the same pod succeeded.
func TestNetworksAsPolicies(t *testing.T) {
	e := onCluster(t)
	env := k8stest.Load(t)
	cfg, cs := env.Client(t)
	ctx := t.Context()

	// A pod outside the sample, in a namespace without policies: what "outside" is here.
	ns := k8stest.Namespace(t, cs)
	image := k8stest.PushImage(t, testutil.Docker(t), env, testutil.BaseImage(t), "base")
	_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "outside", Labels: k8stest.Labels(t)},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "outside", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sh", "-c", "echo outside > /tmp/index.html; exec httpd -f -p 80 -h /tmp"}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outside, err := k8stest.WaitPodReady(ctx, cs, ns, "outside")
	if err != nil {
		t.Fatal(err)
	}
	outsideIP := outside.Status.PodIP

	serve := func(name string) string {
		return `["sh", "-c", "echo ` + name + ` > /tmp/index.html; exec httpd -f -p 80 -h /tmp"]`
	}
	task := e.task(t, orchestrator.TaskSpec{Name: "networks", YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ` + serve("default") + `
    networks: [front, secret]
  web:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ` + serve("web") + `
    networks: [front, back]
  db:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ` + serve("db") + `
    networks: [back]
  vault:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ` + serve("vault") + `
    networks: [secret]
  offline:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ` + serve("offline") + `
    network_mode: none
networks:
  front: {}
  back: {}
  secret:
    internal: true
`)})
	s := e.sample(t, task)
	ips := map[string]string{}
	for _, svc := range []string{"default", "web", "db", "vault", "offline"} {
		pod, err := cs.CoreV1().Pods(s.Project()).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ips[svc] = pod.Status.PodIP
	}

	fetch := func(from, target string) string {
		res, err := mustSandbox(t, s, from).Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", fetchScript, "sh", target}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatalf("fetch %s from %s: %v", target, from, err)
		}
		return strings.TrimSpace(res.StdoutText())
	}
	allowed := func(from, target, want string) {
		t.Helper()
		start := time.Now()
		var got string
		err := k8stest.Poll(ctx, 60*time.Second, func(context.Context) (bool, error) {
			got = fetch(from, target)
			return got == want, nil
		})
		if err != nil {
			t.Errorf("%s -> %s: got %q, want %q (retried for %s)", from, target, got, want, time.Since(start).Round(time.Millisecond))
		} else {
			t.Logf("%s -> %s allowed after %s", from, target, time.Since(start).Round(time.Millisecond))
		}
	}
	denied := func(from, target string) {
		t.Helper()
		if got := fetch(from, target); got != "" {
			t.Errorf("%s -> %s: answered %q, want it dropped", from, target, got)
		}
	}

	// Shared networks: default and web share front, web and db share back.
	allowed("default", "web", "web")
	denied("default", "db")
	denied("default", ips["db"])
	allowed("web", "db", "db")
	allowed("db", "web", "web")
	denied("db", "default")
	// Open egress reaches outside the sample.
	allowed("default", outsideIP, "outside")
	// Internal: vault reaches default by name across secret, and default reaches vault, but
	// vault reaches nothing outside the sample, nor a service it shares no network with.
	allowed("vault", "default", "default")
	allowed("default", "vault", "vault")
	denied("vault", outsideIP)
	denied("vault", ips["web"])
	// network_mode none: no way in, no way out.
	denied("default", ips["offline"])
	allowed("web", outsideIP, "outside")
	denied("offline", outsideIP)
	denied("offline", ips["web"])

	// Nothing outside the sample reaches in, not even from a pod with open egress.
	in := func(target string) string {
		res, err := k8stest.Exec(ctx, cfg, cs, ns, "outside", "sh", "-c", fetchScript, "sh", target)
		if err != nil {
			t.Fatalf("fetch %s from outside: %v", target, err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	if got := in(outsideIP); got != "outside" {
		t.Fatalf("the outside pod cannot fetch from itself: %q", got)
	}
	for _, svc := range []string{"default", "web", "vault"} {
		if got := in(ips[svc]); got != "" {
			t.Errorf("outside -> %s: answered %q, want it dropped", svc, got)
		}
	}
}
