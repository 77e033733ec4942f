package kubernetes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/k8stest"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// Attacks from a sample on the cluster, on the host and on other samples, each written as the
// agent (or the compose file) would try it, and judged by outcome.

// plant is what a root agent leaves in each directory it is given, for the host to trip over:
// a setuid root copy of busybox and a device node (/dev/mem's numbers) anyone may open.
const plant = `set -e; for d in "$@"; do cp /bin/busybox "$d/suid"; chmod 4755 "$d/suid"; mknod -m 666 "$d/mem" c 1 1; done`

// A volume one service mounts is an emptyDir of its pod, and one two services share is a
// directory under the volume root, on a cluster without a StorageClass: never under /tmp. A
// root agent plants a setuid binary and a device node in both. From the host, nobody but root
// reaches either (nobody cannot even start the binary), the shared directory lies on a nosuid,
// nodev mount (its device node does not open, even for root), and it is gone after the sample.
func TestAttackVolumePlantsAreInertOnTheHost(t *testing.T) {
	c := newCluster(t)
	if c.env.Volumes == "" {
		t.Fatal("bin/k8s/env names no volume root (COMPOSEBOX_K8S_VOLUMES): rerun make k8s")
	}
	ctx := t.Context()
	task := taskInit(t, c.orchestrator(t), orchestrator.TaskSpec{Name: uniqueTask("plant"), YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["shared:/shared", "own:/own"]
  other:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes: ["shared:/shared"]
volumes:
  shared: {}
  own: {}
`)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", plant, "sh", "/shared", "/own"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the agent's plant: %+v %v", res, err)
	}
	if got := sh(t, mustSandbox(t, s, "other"), "stat -c %a /shared/suid"); got != "4755\n" {
		t.Fatalf("the other service sees %q in the shared volume", got)
	}

	pod, err := c.admin.CoreV1().Pods(s.Project()).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	if vols["volume-own"].EmptyDir == nil {
		t.Fatalf("a volume of one service is %+v, want an emptyDir", vols["volume-own"])
	}
	hp := vols["volume-shared"].HostPath
	if hp == nil {
		t.Fatalf("the shared volume is %+v, want a directory on the node", vols["volume-shared"])
	}
	shared := hp.Path
	if strings.HasPrefix(shared, "/tmp/") || !strings.HasPrefix(shared, c.env.Volumes+"/") {
		t.Fatalf("the shared volume is %s, want it under the volume root %s", shared, c.env.Volumes)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(c.env.Volumes, &st); err != nil || st.Mode&0o7777 != 0o700 || st.Uid != 0 {
		t.Fatalf("the volume root %s: mode %o, owner %d, %v; want 0700 root's", c.env.Volumes, st.Mode&0o7777, st.Uid, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(shared, &fs); err != nil || fs.Flags&unix.ST_NOSUID == 0 || fs.Flags&unix.ST_NODEV == 0 {
		t.Fatalf("statfs %s: flags %#x, %v; want nosuid and nodev", shared, fs.Flags, err)
	}
	// The kubelet keeps emptyDirs in its pods' directories (make k8s's kubelet root lies beside
	// the volume root).
	own := filepath.Join(filepath.Dir(c.env.Volumes), "kubelet", "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "volume-own")
	for _, dir := range []string{shared, own} {
		fi, err := os.Lstat(filepath.Join(dir, "suid"))
		if err != nil || fi.Mode()&os.ModeSetuid == 0 {
			t.Fatalf("the planted binary in %s: %v, %v (the attack did not get this far)", dir, fi, err)
		}
		if !closedToOthers(dir) {
			t.Errorf("%s: every directory above it is traversable by any user of the host", dir)
		}
		// A user of the host runs the planted binary: it does not start.
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "suid"), "id", "-u")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err == nil || !errors.Is(err, os.ErrPermission) {
			t.Errorf("nobody ran %s/suid: %q, %v; want permission denied", dir, out, err)
		}
	}
	// Even root cannot use the device node in the shared directory.
	if f, err := os.Open(filepath.Join(shared, "mem")); err == nil || !errors.Is(err, os.ErrPermission) {
		if f != nil {
			f.Close()
		}
		t.Errorf("open the planted device node: %v, want permission denied (nodev)", err)
	}

	if err := s.Cleanup(ctx); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if _, err := os.Lstat(filepath.Dir(shared)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sample's volume directory %s after cleanup: %v", filepath.Dir(shared), err)
	}
}

// closedToOthers reports whether some directory on dir's path lacks the search permission for
// users other than its owner and group.
func closedToOthers(dir string) bool {
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return true
		}
	}
	return false
}

// A task that names the image composebox built for another task, once only the registry holds
// it (the local engine's copy removed), is refused as on Docker: the registry's copy is
// described by its configuration there, labels included.
func TestAttackOtherTasksImageFromTheRegistry(t *testing.T) {
	c := newCluster(t)
	o := c.orchestrator(t)
	builder := uniqueTask("builder")
	secret := uniqueTask("secret")
	built := taskInit(t, o, orchestrator.TaskSpec{Name: builder, YAML: []byte(`
services:
  default:
    build:
      context: .
      dockerfile_inline: |
        FROM ${COMPOSEBOX_BASE_IMAGE}
        RUN echo ` + secret + ` > /secret
    command: ["tail", "-f", "/dev/null"]
`)})
	ref := built.Images()["default"]
	if ref == "" {
		t.Fatalf("the builder task built nothing: %v", built.Images())
	}
	if _, err := testutil.Docker(t).ImageRemove(t.Context(), ref, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		t.Fatal(err)
	}
	inRegistry := c.env.Registry + "/" + reference.Path(named) + ":" + named.(reference.Tagged).Tag()
	info, err := c.b.Image(t.Context(), ref)
	if err != nil || info.Labels[labels.LabelTask] != builder || !strings.HasPrefix(info.ID, "sha256:") {
		t.Fatalf("the registry's copy of %s: %+v, %v; want its labels (task %s)", ref, info, err, builder)
	}

	for _, name := range []string{ref, inRegistry} {
		thief := uniqueTask("thief")
		task, err := o.TaskInit(t.Context(), orchestrator.TaskSpec{Name: thief, YAML: []byte(`
services:
  default:
    image: ` + name + `
    command: ["cat", "/secret"]
`)})
		if task != nil {
			t.Cleanup(func() { _ = task.Cleanup(t.Context()) })
		}
		var pe *compose.PolicyError
		if !errors.Is(err, orchestrator.ErrPolicyViolation) || !errors.As(err, &pe) || len(pe.Violations) != 1 ||
			pe.Violations[0].Rule != "other-tasks-images" || !strings.Contains(err.Error(), builder) {
			t.Errorf("a task naming %s: %v; want one other-tasks-images violation naming %s", name, err, builder)
		}
		if got := c.namespaces(t, thief); len(got) != 0 {
			t.Errorf("the refused task made namespaces %v", got)
		}
	}
}

// hostAddrs are this machine's own addresses, loopback and link-local ones left out (a pod has
// its own loopback, and reaches a link-local address only on its own link).
func hostAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(ipn.IP)
		if ip = ip.Unmap(); !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
			out = append(out, ip)
		}
	}
	return out
}

// listenEverywhere listens on every address of the host, each on a port of its own, answering
// secret to whoever connects and counting them. It returns "address port" pairs.
func listenEverywhere(t *testing.T, secret string, accepted *atomic.Int32) []string {
	t.Helper()
	var targets []string
	for _, a := range hostAddrs(t) {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				t.Logf("the host listener on %s accepted %s", ln.Addr(), conn.RemoteAddr())
				_, _ = io.WriteString(conn, secret+"\n")
				conn.Close()
			}
		}()
		ap := netip.MustParseAddrPort(ln.Addr().String())
		targets = append(targets, fmt.Sprintf("%s %d", ap.Addr(), ap.Port()))
	}
	return targets
}

// tryAll connects from sb to each "address port" target at once, 3 s each, and prints
// "address port: what came back".
const tryAll = `for tgt in "$@"; do (set -- $tgt; r=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$1" "$2" 2>&1 | tr '\n' ' '); echo "$1 $2: $r") & done; wait`

// A sample on the cluster reaches neither a Docker sample (on its 10.213.x address, from
// composebox's subnet pool) nor any service of the host, on any of the host's addresses: the
// host's listeners accept nothing, and the Docker sample's page never comes back, while the
// sample's own services reach each other and the host reaches the Docker sample. The sample's
// egress policy, read back from the cluster, denies the node, the service range and the
// pool.
func TestAttackSampleReachesNeitherDockerNorTheHost(t *testing.T) {
	c := newCluster(t)
	ctx := t.Context()
	secret := uniqueTask("secret")

	docker, err := orchestrator.New(orchestrator.WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = docker.Close() })
	serve := `["sh", "-c", "echo ` + secret + ` > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]`
	dtask := taskInit(t, docker, orchestrator.TaskSpec{Name: uniqueTask("dockerside"), YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ` + serve + `
`)})
	ds := sampleInit(t, dtask, orchestrator.SampleSpec{})
	ctr, err := testutil.Docker(t).ContainerInspect(ctx, ds.Default().ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	var dockerIP netip.Addr
	for _, n := range ctr.NetworkSettings.Networks {
		if a, err := netip.ParseAddr(n.IPAddress); err == nil && netip.MustParsePrefix("10.213.0.0/16").Contains(a) {
			dockerIP = a
		}
	}
	if !dockerIP.IsValid() {
		t.Fatalf("the Docker sample has no address in 10.213.0.0/16: %+v", ctr.NetworkSettings.Networks)
	}
	// The host reaches it: the page is there to be taken.
	if body := httpGet(t, "http://"+netip.AddrPortFrom(dockerIP, 8080).String()+"/"); strings.TrimSpace(body) != secret {
		t.Fatalf("the host fetched %q from the Docker sample", body)
	}

	var accepted atomic.Int32
	targets := append(listenEverywhere(t, secret, &accepted), dockerIP.String()+" 8080")

	task := taskInit(t, c.orchestrator(t), orchestrator.TaskSpec{Name: uniqueTask("reach"), YAML: []byte(`
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
  peer:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo peer > /tmp/index.html; exec httpd -f -p 80 -h /tmp"]
`)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	// The sample's own services reach each other (policies are applied by then).
	err = k8stest.Poll(ctx, time.Minute, func(context.Context) (bool, error) {
		res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", fetchScript, "sh", "peer"}, Timeout: 20 * time.Second})
		return err == nil && strings.TrimSpace(res.StdoutText()) == "peer", nil
	})
	if err != nil {
		t.Fatal("default never reached peer")
	}
	res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: append([]string{"sh", "-c", tryAll, "sh"}, targets...), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(res.StdoutText()))
	tried := 0
	for sc.Scan() {
		tried++
		if strings.Contains(sc.Text(), secret) {
			t.Errorf("the sample got through: %s", sc.Text())
		}
	}
	t.Logf("tried from the sample:\n%s", res.StdoutText())
	if tried != len(targets) || accepted.Load() != 0 {
		t.Errorf("tried %d of %d targets, the host's listeners accepted %d connections; want none: %s", tried, len(targets), accepted.Load(), res.StdoutText())
	}

	pol, err := c.admin.NetworkingV1().NetworkPolicies(s.Project()).Get(ctx, "composebox-egress", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	except := map[string]bool{}
	for _, to := range pol.Spec.Egress[0].To {
		for _, e := range to.IPBlock.Except {
			except[e] = true
		}
	}
	node, err := c.admin.CoreV1().Nodes().Get(ctx, c.env.Node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.213.0.0/16", "10.96.0.0/16", "169.254.0.0/16", dockerNetwork(t, ctr.NetworkSettings.Networks)}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			want = append(want, a.Address+"/32")
		}
	}
	for _, w := range want {
		if !except[w] && !coveredBy(w, except) {
			t.Errorf("the egress policy does not deny %s: %v", w, except)
		}
	}
}

// dockerNetwork is the subnet of the Docker sample's network, as the engine reports it.
func dockerNetwork(t *testing.T, nets map[string]*network.EndpointSettings) string {
	t.Helper()
	for _, n := range nets {
		if n.IPPrefixLen > 0 {
			a := netip.MustParseAddr(n.IPAddress)
			return netip.PrefixFrom(a, n.IPPrefixLen).Masked().String()
		}
	}
	t.Fatal("the Docker sample's network has no prefix")
	return ""
}

// coveredBy reports whether prefix s lies inside one of set's.
func coveredBy(s string, set map[string]bool) bool {
	p := netip.MustParsePrefix(s)
	for q := range set {
		if qp, err := netip.ParsePrefix(q); err == nil && qp.Bits() <= p.Bits() && qp.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// A sample that spawns processes without end is stopped at 4096, as on Docker: the pod's
// cgroup holds pids.max 4096, and of 4200 processes the agent asks for, the kernel refuses the
// rest.
func TestAttackForkBombIsCappedOnKubernetes(t *testing.T) {
	c := newCluster(t)
	ctx := t.Context()
	task := taskInit(t, c.orchestrator(t), orchestrator.TaskSpec{Name: uniqueTask("pids"), YAML: []byte(keepAlive)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	pod, err := c.admin.CoreV1().Pods(s.Project()).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob("/sys/fs/cgroup/pids/kubepods*/pod" + string(pod.UID) + "/pids.max")
	more, _ := filepath.Glob("/sys/fs/cgroup/pids/kubepods*/*/pod" + string(pod.UID) + "/pids.max")
	matches = append(matches, more...)
	if len(matches) != 1 {
		t.Fatalf("the pod's pids cgroup: %v", matches)
	}
	if max, err := os.ReadFile(matches[0]); err != nil || strings.TrimSpace(string(max)) != "4096" {
		t.Fatalf("%s: %q, %v; want 4096", matches[0], max, err)
	}
	// The spawning subshell dies at its first refused fork; the processes are then counted,
	// and the sleepers killed, with the shell's builtins alone (at the limit, nothing forks).
	res, err := s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", `
(n=0; while [ $n -lt 4200 ]; do sleep 600 >/dev/null 2>&1 </dev/null & n=$((n+1)); done)
set -- /proc/[0-9]*; echo "$#"
for p in /proc/[0-9]*; do read -r c <"$p/comm" && [ "$c" = sleep ] && kill -9 "${p#/proc/}"; done; true`},
		Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var running int
	if _, err := fmt.Sscan(res.StdoutText(), &running); err != nil || running > 4096 || running < 4000 {
		t.Fatalf("processes running after asking for 4200: %q (%v); want at most 4096", res.StdoutText(), err)
	}
	t.Logf("%d processes ran of the 4200 asked for", running)
	if !strings.Contains(res.StderrText(), "fork") {
		t.Errorf("no fork was refused: %q", res.StderrText())
	}
}

// A reverse lookup of another sample's pod address names nothing: no namespace (the other
// sample's project), no Service; the sample's own names still resolve.
func TestReverseDNSNamesNoOtherSample(t *testing.T) {
	c := newCluster(t)
	ctx := t.Context()
	task := taskInit(t, c.orchestrator(t), orchestrator.TaskSpec{Name: uniqueTask("ptr"), YAML: []byte(twoServices)})
	a := sampleInit(t, task, orchestrator.SampleSpec{})
	b := sampleInit(t, task, orchestrator.SampleSpec{})
	ip := func(s *orchestrator.Sample, svc string) string {
		pod, err := c.admin.CoreV1().Pods(s.Project()).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pod.Status.PodIP
	}
	nslookup := func(name string) string {
		res, err := a.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"nslookup", name}, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return res.StdoutText() + res.StderrText()
	}
	if out := nslookup("side"); !strings.Contains(out, ip(a, "side")) {
		t.Fatalf("the sample's own name does not resolve: %q", out)
	}
	for _, addr := range []string{ip(b, "default"), ip(b, "side"), ip(a, "side")} {
		out := nslookup(addr)
		if strings.Contains(out, b.Project()) || strings.Contains(out, a.Project()) || strings.Contains(out, "cluster.local") || strings.Contains(out, "name =") {
			t.Errorf("reverse lookup of %s names something: %q", addr, out)
		}
	}
}

// A sample whose pods were all deleted under it is unavailable, naming the services that are
// gone, not unknown: Open, a sandbox's exec and ps say so, and Cleanup removes the rest.
func TestDeletedPodsMakeSampleUnavailable(t *testing.T) {
	c := newCluster(t)
	o := c.orchestrator(t)
	ctx := t.Context()
	task := taskInit(t, o, orchestrator.TaskSpec{Name: uniqueTask("gone"), YAML: []byte(twoServices)})
	s := sampleInit(t, task, orchestrator.SampleSpec{})
	zero := int64(0)
	if err := c.admin.CoreV1().Pods(s.Project()).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pods gone", func() bool {
		list, err := c.admin.CoreV1().Pods(s.Project()).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
	_, err := o.Open(ctx, s.Project())
	wantUnavailable(t, "open", err, "default", "no longer exists")
	_, err = s.Default().Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
	wantUnavailable(t, "exec", err)
	ps, err := o.Ps(ctx, s.Project())
	if err != nil || len(ps) != 2 || ps[0].Service != "default" || !ps[0].Default || ps[0].State != "removed" || ps[1].State != "removed" {
		t.Errorf("ps: %+v, %v; want both services removed, default first", ps, err)
	}
	if err := s.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Namespaces().Get(ctx, s.Project(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace after cleanup: %v", err)
	}
}
