package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/composebox/composebox/cleanup/labels"
)

// `composebox --backend kubernetes up --reaper` starts a watchdog that, when the command is
// killed with SIGKILL before its sample is ready, removes the sample's namespace by itself,
// through the Kubernetes backend the watchdog rebuilds from its owner's description, and then
// exits.
func TestKubernetesReaperRemovesAKilledUpsSample(t *testing.T) {
	c := newOnCluster(t)
	bin := buildCLI(t)
	task := uniqueTask("k8sreaper")
	t.Cleanup(func() {
		_, _, _ = runCLI(t, append(slices.Clone(c.flags), "cleanup", "--all", "--task", task)...)
	})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(neverHealthy), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(c.flags), "up", "--reaper", "--task", task, "--wait-timeout", "4m", dir)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "COMPOSEBOX_STATE_DIR="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sel := labels.LabelTask + "=" + task

	// Kill the command once its sample's namespace exists: `up` is waiting for a readiness
	// that never comes.
	var owner string
	if err := waitNamespaces(ctx, c.admin, sel, 3*time.Minute, func(nss []corev1.Namespace) bool {
		for _, ns := range nss {
			// Label values cannot hold the owner's colons: the annotation has it as written.
			owner = ns.Annotations[labels.LabelOwner]
		}
		return owner != ""
	}); err != nil {
		t.Fatalf("the sample's namespace never appeared: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	if owner == labels.OwnerDetached || !reaperRunning(owner) {
		t.Fatalf("owner %s: no watchdog runs for it", owner)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// Nothing else removes it: the watchdog does, within the bound.
	if err := waitNamespaces(ctx, c.admin, sel, 2*time.Minute, func(nss []corev1.Namespace) bool { return len(nss) == 0 }); err != nil {
		t.Fatalf("the killed command's namespace is still there: %v", err)
	}
	if !poll(30*time.Second, func() bool { return !reaperRunning(owner) }) {
		t.Errorf("the watchdog of %s is still running after removing its sample", owner)
	}
}

// waitNamespaces waits, within timeout, until the namespaces carrying the labels of sel
// satisfy cond: it lists them, then follows a watch from that listing, so that no change is
// missed between the two.
func waitNamespaces(ctx context.Context, cs k8s.Interface, sel string, timeout time.Duration, cond func([]corev1.Namespace) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		byName := map[string]corev1.Namespace{}
		for _, ns := range list.Items {
			byName[ns.Name] = ns
		}
		check := func() bool {
			nss := make([]corev1.Namespace, 0, len(byName))
			for _, ns := range byName {
				nss = append(nss, ns)
			}
			return cond(nss)
		}
		if check() {
			return nil
		}
		w, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		closed := false
		for !closed {
			select {
			case <-ctx.Done():
				w.Stop()
				return ctx.Err()
			case ev, ok := <-w.ResultChan():
				if !ok {
					closed = true // the server ended the watch: list again
					break
				}
				ns, isNS := ev.Object.(*corev1.Namespace)
				if !isNS {
					continue
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					byName[ns.Name] = *ns
				case watch.Deleted:
					delete(byName, ns.Name)
				}
				if check() {
					w.Stop()
					return nil
				}
			}
		}
	}
}

// A library program on a cluster (orchestrator.WithBackend of a Kubernetes backend, with
// WithReaper, its main calling backends.ReaperMain) gets the same watchdog: its sample's
// namespace goes once it is killed with SIGKILL.
func TestKubernetesReaperOfALibraryOwner(t *testing.T) {
	c := newOnCluster(t)
	task := uniqueTask("k8sreaplib")
	t.Cleanup(func() {
		_, _, _ = runCLI(t, append(slices.Clone(c.flags), "cleanup", "--all", "--task", task)...)
	})
	owner := startOwner(t, "own+reaper", task, helperKubeconfigEnv+"="+c.kubeconfig, helperRegistryEnv+"="+c.registry)
	if !reaperRunning(owner.owner) {
		t.Fatalf("no watchdog for %s", owner.owner)
	}
	ctx := t.Context()
	sel := labels.LabelTask + "=" + task
	if err := waitNamespaces(ctx, c.admin, sel, time.Minute, func(nss []corev1.Namespace) bool { return len(nss) == 1 }); err != nil {
		t.Fatalf("the owner's namespace: %v", err)
	}
	owner.kill()
	if err := waitNamespaces(ctx, c.admin, sel, 2*time.Minute, func(nss []corev1.Namespace) bool { return len(nss) == 0 }); err != nil {
		t.Fatalf("the killed owner's namespace %s is still there: %v", owner.project, err)
	}
	if !poll(30*time.Second, func() bool { return !reaperRunning(owner.owner) }) {
		t.Errorf("the watchdog of %s is still running after removing its sample", owner.owner)
	}
}
