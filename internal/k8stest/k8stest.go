// Package k8stest holds helpers for tests that run against the local Kubernetes cluster that
// `make k8s` brings up (scripts/k8s). Outside `make test` that cluster is optional: a test
// using it is skipped, saying why, when bin/k8s/env is absent. `make test` brings the cluster
// up and sets $COMPOSEBOX_K8S_REQUIRED, which turns that skip into a failure, so that a run
// that should have covered Kubernetes never passes without it. Every object a helper creates
// carries composebox's labels and is removed by t.Cleanup, registered before the helper
// returns.
package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/composebox/composebox/cleanup/labels"
)

// EnvRequired, when set (`make test` sets it), fails a test that needs the cluster when it is
// absent, instead of skipping it.
const EnvRequired = "COMPOSEBOX_K8S_REQUIRED"

// Env is what `make k8s` wrote into bin/k8s/env.
type Env struct {
	Kubeconfig string // KUBECONFIG: the cluster's admin
	Registry   string // COMPOSEBOX_REGISTRY: host:port of the registry Docker pushes to
	Node       string // COMPOSEBOX_K8S_NODE
	DNS        string // COMPOSEBOX_K8S_DNS: the nameserver pods use
	// Containerd is COMPOSEBOX_K8S_CONTAINERD: the socket of the cluster's own containerd.
	Containerd string
	// Volumes is COMPOSEBOX_K8S_VOLUMES: the node directory of the volumes several services of
	// a sample share (the cluster has no StorageClass).
	Volumes string
}

// Load reads bin/k8s/env from the repository's root, skipping the test when it is absent
// (no local cluster is up).
func Load(t testing.TB) Env {
	t.Helper()
	path, err := EnvPath()
	if err != nil {
		t.Fatalf("find bin/k8s/env: %v", err)
	}
	env, err := ReadEnv(path)
	if errors.Is(err, os.ErrNotExist) && os.Getenv(EnvRequired) != "" {
		t.Fatalf("no local Kubernetes cluster (%s is absent) and $%s is set: run `make k8s`", path, EnvRequired)
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no local Kubernetes cluster (%s is absent): run `make k8s` to include this test", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// ReadEnv reads an env file `make k8s` wrote. An absent file is an error that wraps
// os.ErrNotExist and says to run `make k8s`: no local cluster is up.
func ReadEnv(path string) (Env, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Env{}, noEnvError{path}
	}
	if err != nil {
		return Env{}, fmt.Errorf("read local cluster env: %w", err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			vars[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return Env{}, fmt.Errorf("read %s: %w", path, err)
	}
	env := Env{Kubeconfig: vars["KUBECONFIG"], Registry: vars["COMPOSEBOX_REGISTRY"],
		Node: vars["COMPOSEBOX_K8S_NODE"], DNS: vars["COMPOSEBOX_K8S_DNS"], Containerd: vars["COMPOSEBOX_K8S_CONTAINERD"],
		Volumes: vars["COMPOSEBOX_K8S_VOLUMES"]}
	if env.Containerd == "" {
		env.Containerd = "/run/composebox-k8s/containerd/containerd.sock" // an env file of an older make k8s
	}
	if env.Kubeconfig == "" || env.Registry == "" {
		return Env{}, fmt.Errorf("%s lacks KUBECONFIG or COMPOSEBOX_REGISTRY: rerun `make k8s`", path)
	}
	return env, nil
}

// noEnvError is an absent env file: no local cluster is up.
type noEnvError struct{ path string }

func (e noEnvError) Error() string {
	return "no local Kubernetes cluster (" + e.path + " is absent): run `make k8s`"
}

func (e noEnvError) Unwrap() error { return os.ErrNotExist }

// EnvPath is bin/k8s/env in the repository's root.
func EnvPath() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "k8s", "env"), nil
}

// repoRoot walks up from the working directory (a package's, under go test) to go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Config is a REST config for env's cluster.
func (e Env) Config(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", e.Kubeconfig, err)
	}
	return cfg
}

// Client is a clientset for env's cluster.
func (e Env) Client(t testing.TB) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg := e.Config(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes client: %v", err)
	}
	return cfg, cs
}

var invalidLabelValue = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// labelValue fits s into a Kubernetes label value: at most 63 characters of [A-Za-z0-9_.-],
// starting and ending with an alphanumeric.
func labelValue(s string) string {
	s = invalidLabelValue.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "_.-")
}

// Labels are composebox's labels for an object a test creates, as label values allow: the
// creation time in Unix seconds.
func Labels(t testing.TB) map[string]string {
	return map[string]string{
		labels.LabelManaged: "true",
		labels.LabelTask:    "test",
		labels.LabelSample:  labelValue(t.Name()),
		labels.LabelOwner:   labelValue(labels.SelfOwner()),
		labels.LabelCreated: strconv.FormatInt(time.Now().Unix(), 10),
	}
}

// Namespace creates a fresh namespace for the test and deletes it at the end, waiting until it
// is gone.
func Namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "cbx-test-", Labels: Labels(t),
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
			return
		}
		if err := waitGone(ctx, cs, ns.Name); err != nil {
			t.Errorf("namespace %s not gone: %v", ns.Name, err)
		}
	})
	return ns.Name
}

func waitGone(ctx context.Context, cs kubernetes.Interface, ns string) error {
	w, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ns})
	if err != nil {
		return err
	}
	defer w.Stop()
	// The watch starts after the delete, so check once that it is not already gone.
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					return nil
				}
				return errors.New("watch closed before the namespace was deleted")
			}
			if ev.Type == "DELETED" {
				return nil
			}
		}
	}
}

// PushImage tags the local image ref as REGISTRY/composebox-test/NAME:TAG, pushes it to env's
// registry and returns that reference. The local tag and the registry's manifest are removed
// at the end of the test.
func PushImage(t testing.TB, docker client.APIClient, env Env, ref, name string) string {
	t.Helper()
	ctx := context.Background()
	inspect, err := docker.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	tag := strings.TrimPrefix(inspect.ID, "sha256:")[:16]
	repo := "composebox-test/" + name
	target := env.Registry + "/" + repo + ":" + tag
	if err := docker.ImageTag(ctx, ref, target); err != nil {
		t.Fatalf("tag %s as %s: %v", ref, target, err)
	}
	t.Cleanup(func() {
		if _, err := docker.ImageRemove(context.Background(), target, image.RemoveOptions{}); err != nil &&
			!client.IsErrNotFound(err) {
			t.Errorf("remove image %s: %v", target, err)
		}
		if err := deleteManifest(env.Registry, repo, tag); err != nil {
			t.Errorf("delete %s from the registry: %v", target, err)
		}
	})
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := docker.ImagePush(ctx, target, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatalf("push %s: %v", target, err)
	}
	defer rc.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil); err != nil {
		t.Fatalf("push %s: %v", target, err)
	}
	return target
}

// deleteManifest removes repo:tag from the registry by its digest (the registry API deletes
// manifests by digest only).
func deleteManifest(reg, repo, tag string) error {
	accept := "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
	req, _ := http.NewRequest(http.MethodHead, "http://"+reg+"/v2/"+repo+"/manifests/"+tag, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	digest := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || digest == "" {
		return fmt.Errorf("HEAD manifest: %s", resp.Status)
	}
	req, _ = http.NewRequest(http.MethodDelete, "http://"+reg+"/v2/"+repo+"/manifests/"+digest, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("DELETE manifest: %s", resp.Status)
	}
	return nil
}

// WaitPodReady waits, through a watch, until the pod's Ready condition is true. It fails fast
// when the pod fails or a container is waiting on an image it cannot get.
func WaitPodReady(ctx context.Context, cs kubernetes.Interface, ns, name string) (*corev1.Pod, error) {
	var last *corev1.Pod
	check := func(p *corev1.Pod) (bool, error) {
		last = p
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod %s/%s ended: %s", ns, name, p.Status.Phase)
		}
		for _, cst := range p.Status.ContainerStatuses {
			if w := cst.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" ||
				w.Reason == "CrashLoopBackOff" || w.Reason == "CreateContainerError") {
				return false, fmt.Errorf("pod %s/%s: %s: %s", ns, name, w.Reason, w.Message)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if ok, err := check(p); ok || err != nil {
			return p, err
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + name, ResourceVersion: p.ResourceVersion,
		})
		if err != nil {
			return nil, err
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ok, err := check(p); ok || err != nil {
				w.Stop()
				return p, err
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return last, fmt.Errorf("pod %s/%s not ready: %w (phase %s)", ns, name, err, last.Status.Phase)
		}
		// The server closed the watch (it does after a while); resume from a fresh GET.
	}
}

// ExecResult is one finished exec's output.
type ExecResult struct {
	Stdout, Stderr string
	ExitCode       int
}

// Exec runs cmd in the pod's first container over the WebSocket protocol, falling back to
// SPDY, and returns its output and exit code.
func Exec(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns, pod string, cmd ...string) (ExecResult, error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return ExecResult{}, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return ExecResult{}, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return ExecResult{}, err
	}
	var out, errb bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb})
	res := ExecResult{Stdout: out.String(), Stderr: errb.String()}
	var exit interface{ ExitStatus() int }
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitStatus()
		return res, nil
	}
	return res, err
}

// Poll calls cond every 200 ms until it reports true or timeout passes; for state the
// cluster converges to asynchronously (a NetworkPolicy reaching the node's firewall).
func Poll(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}

// KillContainer kills the main process of the pod's first container from the host, through
// the cluster's containerd (as a crash or the OOM killer would, and as `docker kill` does),
// and waits until the pod's status shows the container terminated. The container's id comes
// from the pod's status, which the kubelet may post a moment after composebox handed the
// sample over: it is waited for.
func (e Env) KillContainer(t testing.TB, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pod *corev1.Pod
	err := Poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].ContainerID != "", err
	})
	if err != nil {
		t.Fatalf("kill %s/%s: no container in the pod's status: %v", ns, name, err)
	}
	_, id, _ := strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
	out, err := exec.CommandContext(ctx, "ctr", "--address", e.Containerd, "-n", "k8s.io", "task", "kill", "-s", "SIGKILL", id).CombinedOutput()
	if err != nil {
		t.Fatalf("kill %s/%s (container %s): %v: %s", ns, name, id, err, out)
	}
	if err := WaitPodStopped(ctx, cs, ns, name); err != nil {
		t.Fatal(err)
	}
}

// WaitPodStopped waits, through a watch, until the pod's first container is terminated or the
// pod is gone.
func WaitPodStopped(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	stopped := func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Terminated != nil
	}
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if stopped(p) {
			return nil
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: p.ResourceVersion})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ev.Type == "DELETED" || ok && stopped(p) {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("pod %s/%s still running: %w", ns, name, ctx.Err())
		}
	}
}
