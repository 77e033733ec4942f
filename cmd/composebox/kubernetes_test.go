package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator/backend"
)

// onCluster is the CLI pointed at the local cluster as the documented service account.
type onCluster struct {
	flags      []string
	kubeconfig string
	registry   string
	admin      k8s.Interface
}

func newOnCluster(t *testing.T) *onCluster {
	t.Helper()
	env := k8stest.Load(t)
	testutil.Docker(t)
	_, admin := env.Client(t)
	kc := k8stest.Kubeconfig(t, env.ServiceAccount(t))
	return &onCluster{flags: []string{"--backend", "kubernetes", "--kubeconfig", kc, "--registry", env.Registry},
		kubeconfig: kc, registry: env.Registry, admin: admin}
}

// cli runs the CLI on the cluster and fails the test on a non-zero exit.
func (c *onCluster) cli(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runCLI(t, append(slices.Clone(c.flags), args...)...)
	if code != 0 {
		t.Fatalf("composebox %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// namespaces are the cluster's namespaces of samples handed over (`up`), not being deleted.
func (c *onCluster) namespaces(t *testing.T) []string {
	t.Helper()
	list, err := c.admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{LabelSelector: labels.ManagedFilter + "," + labels.LabelOwner + "=" + labels.OwnerDetached})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ns := range list.Items {
		if ns.DeletionTimestamp == nil {
			out = append(out, ns.Name)
		}
	}
	slices.Sort(out)
	return out
}

func (c *onCluster) gone(t *testing.T, project string) {
	t.Helper()
	if _, err := c.admin.CoreV1().Namespaces().Get(t.Context(), project, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s still there: %v", project, err)
	}
}

// On Kubernetes too, a sample whose owner is killed with SIGKILL shows as stale in `ls`,
// with its pod counted, and `cleanup --stale` removes its namespace; while the owner lives,
// `ls` shows it alive, running and healthy.
func TestKubernetesKilledOwnersSampleIsStaleAndCleanedUp(t *testing.T) {
	c := newOnCluster(t)
	task := uniqueTask("k8skill")
	t.Cleanup(func() {
		_, _, _ = runCLI(t, append(slices.Clone(c.flags), "cleanup", "--all", "--task", task)...)
	})
	for i := range 3 {
		owner := startOwner(t, "own", task, helperKubeconfigEnv+"="+c.kubeconfig, helperRegistryEnv+"="+c.registry)
		got := lsJSON(t, task, c.flags...)
		if p, ok := got[owner.project]; !ok || p.Status != backend.StatusAlive || p.Owner != owner.owner || p.Containers != 1 || p.Running != 1 || p.Health != "ok" {
			t.Fatalf("run %d: ls before the kill: %+v, want %s alive with one running pod", i, got, owner.project)
		}
		owner.kill()
		got = lsJSON(t, task, c.flags...)
		if p, ok := got[owner.project]; !ok || p.Status != backend.StatusStale || !p.Stale || p.Containers != 1 {
			t.Fatalf("run %d: ls after kill -9: %+v, want %s stale", i, got, owner.project)
		}
		res := cleanupJSON(t, append([]string{"--stale", "--task", task}, c.flags...)...)
		if names := removedNames(res); !slices.Equal(names, []string{owner.project}) || res.Projects[0].Removed == nil || res.Projects[0].Removed.Containers != 1 {
			t.Fatalf("run %d: cleanup --stale removed %v (%+v), want %s", i, names, res.Projects, owner.project)
		}
		c.gone(t, owner.project)
		if got := lsJSON(t, task, c.flags...); len(got) != 0 {
			t.Fatalf("run %d: ls after cleanup: %+v", i, got)
		}
	}
}

// `composebox --backend kubernetes up testdata/projects/multi-service` gives a working sample
// (names resolve across services, exec works), and `down` leaves the cluster's handed-over
// samples as they were.
func TestKubernetesUpExecDown(t *testing.T) {
	c := newOnCluster(t)
	before := c.namespaces(t)
	project := strings.TrimSpace(c.cli(t, "up", "../../testdata/projects/multi-service"))
	if !strings.HasPrefix(project, "cbx-multi-service-") {
		t.Fatalf("up printed %q, want the project", project)
	}
	t.Cleanup(func() { _, _, _ = runCLI(t, append(slices.Clone(c.flags), "down", project)...) })
	out := c.cli(t, "exec", "-p", project, "--", "sh", "-c", "wget -q -O - http://web/ && nc db 5432 </dev/null")
	if !strings.Contains(out, "pong") {
		t.Fatalf("exec across services: %q", out)
	}
	got := lsJSON(t, "multi-service", c.flags...)
	if p, ok := got[project]; !ok || p.Status != backend.StatusDetached || p.Containers != 3 || p.Running != 3 {
		t.Fatalf("ls: %+v, want %s detached with 3 running pods", got, project)
	}
	// Its pods deleted under it (an eviction, a person), the sample is unavailable, not
	// unknown.
	zero := int64(0)
	if err := c.admin.CoreV1().Pods(project).DeleteCollection(t.Context(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k8stest.Poll(t.Context(), time.Minute, func(ctx context.Context) (bool, error) {
		list, err := c.admin.CoreV1().Pods(project).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, nil
	}); err != nil {
		t.Fatal("the pods were not deleted")
	}
	if code, _, errOut := runCLI(t, append(slices.Clone(c.flags), "exec", "-p", project, "--", "true")...); code == 0 ||
		!strings.Contains(errOut, "unavailable") || !strings.Contains(errOut, "no longer exists") {
		t.Fatalf("exec into the sample whose pods were deleted: exit %d, %q; want unavailable", code, errOut)
	}
	c.cli(t, "down", project)
	c.gone(t, project)
	if after := c.namespaces(t); !slices.Equal(after, before) {
		t.Fatalf("namespaces before up %v, after down %v", before, after)
	}
}

// On Kubernetes as on Docker, a name from the CONTAINER column of `ps` (a service's pod)
// selects its sample: `cleanup --dry-run NAME` plans its removal and removes nothing, and
// `cleanup NAME` removes it.
func TestKubernetesCleanupByContainerName(t *testing.T) {
	c := newOnCluster(t)
	task := uniqueTask("k8sname")
	dir := filepath.Join(t.TempDir(), task)
	// The service is named after the task, so that no other sample's pod shares its name.
	svc := strings.ReplaceAll(task, "cbxt-", "svc-")
	compose := "services:\n  " + svc + ":\n    image: ${COMPOSEBOX_BASE_IMAGE}\n    command: [\"tail\", \"-f\", \"/dev/null\"]\n    x-default: true\n"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	project := strings.TrimSpace(c.cli(t, "up", dir))
	t.Cleanup(func() { _, _, _ = runCLI(t, append(slices.Clone(c.flags), "down", project)...) })
	p, ok := lsJSON(t, task, c.flags...)[project]
	if !ok || len(p.ContainerNames) != 1 {
		t.Fatalf("ls: %+v, want %s with one container", p, project)
	}
	ctr := p.ContainerNames[0]
	res := cleanupJSON(t, append([]string{"--dry-run", ctr}, c.flags...)...)
	if !res.DryRun || !slices.Equal(removedNames(res), []string{project}) {
		t.Fatalf("cleanup --dry-run %s: %+v, want %s", ctr, res, project)
	}
	if _, err := c.admin.CoreV1().Namespaces().Get(t.Context(), project, metav1.GetOptions{}); err != nil {
		t.Fatalf("the dry run removed the namespace: %v", err)
	}
	res = cleanupJSON(t, append([]string{ctr}, c.flags...)...)
	if !slices.Equal(removedNames(res), []string{project}) || res.Projects[0].Error != "" {
		t.Fatalf("cleanup %s: %+v, want %s removed", ctr, res, project)
	}
	c.gone(t, project)
}
