package kubernetes_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/kubernetes"
	"github.com/composebox/composebox/orchestrator"
	"github.com/composebox/composebox/orchestrator/backends"
)

func project(name string) string {
	// Relative to the package's directory, where go test runs it: a -trimpath build's
	// source paths are module paths, not the checkout's.
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "projects", name))
	if err != nil {
		panic(err)
	}
	return dir
}

// newBackend is a backend on the local cluster acting as a service account bound to the
// documented ClusterRole only (docs/kubernetes-rbac.yaml), never as the cluster's admin.
func newBackend(t *testing.T) *kubernetes.Backend {
	t.Helper()
	env := k8stest.Load(t)
	testutil.Docker(t)
	var dns []string
	if env.DNS != "" {
		dns = []string{env.DNS}
	}
	b, err := backends.Kubernetes(kubernetes.Options{Config: env.ServiceAccount(t), Registry: env.Registry, DNS: dns, VolumeRoot: env.Volumes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// A three-service sample with a built image and healthchecked dependencies comes up on the
// cluster, its services reach each other by short name, exec and files work, and Cleanup
// leaves no namespace.
func TestMultiServiceOnKubernetes(t *testing.T) {
	b := newBackend(t)
	o, err := orchestrator.New(orchestrator.WithBackend(b), orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	ctx := t.Context()
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Path: project("multi-service")})
	if err != nil {
		t.Fatalf("task init: %v", err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background()) })
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		t.Fatalf("sample init: %v", err)
	}
	projectName := s.Project()
	t.Cleanup(func() { _ = s.Cleanup(context.Background()) })
	if !strings.HasPrefix(projectName, "cbx-multi-service-") {
		t.Errorf("project %q", projectName)
	}
	ns, err := b.Clientset().CoreV1().Namespaces().Get(ctx, projectName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace named as the project: %v", err)
	}
	if ns.Labels[labels.LabelManaged] != "true" || ns.Annotations[labels.LabelOwner] != labels.SelfOwner() {
		t.Errorf("namespace labels %v annotations %v", ns.Labels, ns.Annotations)
	}
	pods, err := b.Clientset().CoreV1().Pods(projectName).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 3 {
		t.Fatalf("pods: %v, %v", pods, err)
	}
	for _, p := range pods.Items {
		if p.Labels[labels.ComposeServiceLabel] == "" || p.Labels[labels.ComposeProjectLabel] != projectName || len(p.OwnerReferences) != 0 {
			t.Errorf("pod %s labels %v owners %v", p.Name, p.Labels, p.OwnerReferences)
		}
	}

	sb := s.Default()
	res, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "wget -q -O - http://web/ && nc db 5432 </dev/null"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("reach web and db by name: %+v, %v", res, err)
	}
	if !strings.Contains(string(res.Stdout), "pong") {
		t.Errorf("db answered %q", res.Stdout)
	}
	res, err = sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", `pwd; echo "$X"; cat; exit 3`},
		Cwd: "/tmp", Env: map[string]string{"X": "from env"}, Stdin: []byte("from stdin")})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "/tmp\nfrom env\nfrom stdin" {
		t.Errorf("exec: %+v (stdout %q), %v", res, res.Stdout, err)
	}
	start := time.Now()
	_, err = sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "sleep 300 & sleep 300"}, Timeout: time.Second})
	if !errors.Is(err, errdefs.ErrTimeout) || time.Since(start) > 30*time.Second {
		t.Errorf("timeout: %v after %s", err, time.Since(start))
	}
	res, err = sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "ps | grep -c '[s]leep 300' || true"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("the timed-out command's processes still run: %q, %v", res.Stdout, err)
	}
	if err := sb.WriteFile(ctx, "/tmp/a/b.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if data, err := sb.ReadFile(ctx, "/tmp/a/b.txt"); err != nil || string(data) != "hello" {
		t.Errorf("read back %q, %v", data, err)
	}
	if _, err := sb.ReadFile(ctx, "/nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := sb.ReadFile(ctx, "/tmp"); !errors.Is(err, errdefs.ErrIsDirectory) {
		t.Errorf("directory: %v", err)
	}

	if err := s.Cleanup(ctx); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if _, err := b.Clientset().CoreV1().Namespaces().Get(ctx, projectName, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s still exists after cleanup", projectName)
	}
}

// An image neither the registry nor the local engine has fails at once as not_found.
func TestMissingImageIsNotFound(t *testing.T) {
	b := newBackend(t)
	_, err := b.Image(t.Context(), "composebox-test/absent:nope")
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("absent image: %v", err)
	}
}
