package kubernetes

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// These tests check the pure mappings from compose's model to Kubernetes objects; the tests
// in kubernetes_test run them on a cluster.

// load loads a compose file as composebox's loader would, in dir (a temporary directory when
// "").
func load(t *testing.T, dir, yaml string) *types.Project {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	p, err := loader.LoadWithContext(t.Context(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml"), Content: []byte(yaml)}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("cbx-test", true) })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDependencyWaves(t *testing.T) {
	p := load(t, "", `
services:
  default:
    image: x
    depends_on:
      web: {condition: service_healthy}
      init: {condition: service_completed_successfully}
  web:
    image: x
    depends_on:
      db: {condition: service_started}
  db: {image: x}
  init: {image: x}
  alone: {image: x}
`)
	waves, err := dependencyWaves(p)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"alone", "db", "init"}, {"web"}, {"default"}}
	if !slices.EqualFunc(waves, want, slices.Equal) {
		t.Fatalf("waves %v, want %v", waves, want)
	}
	need := waveNeeds(p, waves[2])
	if need["web"] != types.ServiceConditionHealthy || need["init"] != types.ServiceConditionCompletedSuccessfully || len(need) != 2 {
		t.Errorf("needs of the last wave: %v", need)
	}
	if need := waveNeeds(p, waves[1]); need["db"] != types.ServiceConditionStarted {
		t.Errorf("needs of web's wave: %v", need)
	}

	// compose-go refuses a cycle when it loads a file; one built past it must still fail.
	cyc := &types.Project{Services: types.Services{
		"a": {Name: "a", DependsOn: types.DependsOnConfig{"b": {Condition: types.ServiceConditionStarted}}},
		"b": {Name: "b", DependsOn: types.DependsOnConfig{"a": {Condition: types.ServiceConditionStarted}}},
	}}
	if _, err := dependencyWaves(cyc); !errors.Is(err, errdefs.ErrInvalidConfig) {
		t.Errorf("cycle: %v", err)
	}
}

func TestWaveNeedsTheStrictestCondition(t *testing.T) {
	p := load(t, "", `
services:
  a: {image: x, depends_on: {dep: {condition: service_started}}}
  b: {image: x, depends_on: {dep: {condition: service_completed_successfully}}}
  c: {image: x, depends_on: {dep: {condition: service_healthy}}}
  dep: {image: x}
`)
	if need := waveNeeds(p, []string{"a", "b", "c"}); need["dep"] != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("needs %v", need)
	}
}

func pod(restart corev1.RestartPolicy, st corev1.ContainerState, ready bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{labels.ComposeServiceLabel: "svc"}},
		Spec:       corev1.PodSpec{RestartPolicy: restart},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: st, Ready: ready}}},
	}
}

func TestConditions(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	exited0 := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	exited3 := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}
	pulling := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	crash := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	never, always := corev1.RestartPolicyNever, corev1.RestartPolicyAlways
	for _, c := range []struct {
		name   string
		pod    *corev1.Pod
		cond   string
		health bool
		ok     bool
		fails  bool
	}{
		{"started: creating", pod(never, pulling, false), types.ServiceConditionStarted, false, false, false},
		{"started: running", pod(never, running, false), types.ServiceConditionStarted, true, true, false},
		{"started: exited with an error", pod(never, exited3, false), types.ServiceConditionStarted, false, true, false},
		{"healthy: running, not ready", pod(never, running, false), types.ServiceConditionHealthy, true, false, false},
		{"healthy: ready", pod(never, running, true), types.ServiceConditionHealthy, true, true, false},
		{"healthy: exited with an error", pod(never, exited3, false), types.ServiceConditionHealthy, true, false, true},
		{"healthy: crash loop", pod(always, crash, false), types.ServiceConditionHealthy, true, false, true},
		{"completed: running", pod(never, running, true), types.ServiceConditionCompletedSuccessfully, false, false, false},
		{"completed: exit 0", pod(never, exited0, false), types.ServiceConditionCompletedSuccessfully, false, true, false},
		{"completed: exit 3", pod(never, exited3, false), types.ServiceConditionCompletedSuccessfully, false, false, true},
		{"completed: exit 3, restarting", pod(always, exited3, false), types.ServiceConditionCompletedSuccessfully, false, false, true},
		{"ready: one-shot done", pod(never, exited0, false), conditionReady, false, true, false},
	} {
		st, reason := podState(c.pod, c.health)
		ok, why := judge(st, reason, c.cond, c.pod.Status.PodIP != "")
		if ok != c.ok || (why != "") != c.fails {
			t.Errorf("%s: met %v, failure %q; want met %v, fails %v", c.name, ok, why, c.ok, c.fails)
		}
	}
}

func policyByName(pols []*netv1.NetworkPolicy, name string) *netv1.NetworkPolicy {
	for _, p := range pols {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func TestNetworkPolicies(t *testing.T) {
	p := load(t, "", `
services:
  default: {image: x, networks: [front, back]}
  web: {image: x, networks: [front]}
  db: {image: x, networks: [back]}
  vault: {image: x, networks: [secret]}
  plain: {image: x}
  offline: {image: x, network_mode: none}
networks:
  front: {}
  back: {}
  secret: {internal: true}
`)
	pols, err := networkPolicies(p, confinement{dns: []netip.Addr{netip.MustParseAddr("10.244.0.1")}, resolvers: []netip.Prefix{netip.MustParsePrefix("fe80::1/128")},
		denied: []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("fe80::1/128")}})
	if err != nil {
		t.Fatal(err)
	}
	deny := policyByName(pols, policyDenyIngress)
	if deny == nil || len(deny.Spec.PodSelector.MatchLabels) != 0 || len(deny.Spec.Ingress) != 0 ||
		!slices.Equal(deny.Spec.PolicyTypes, []netv1.PolicyType{netv1.PolicyTypeIngress}) {
		t.Fatalf("no namespace-wide ingress deny: %+v", deny)
	}
	for _, n := range []string{"front", "back", "secret", "default"} {
		pol := policyByName(pols, policyNetwork+n)
		if pol == nil {
			t.Fatalf("no policy for network %s: %v", n, pols)
		}
		sel := pol.Spec.PodSelector.MatchLabels
		if sel[networkLabel(n)] != "true" || len(pol.Spec.Ingress) != 1 || pol.Spec.Ingress[0].From[0].PodSelector.MatchLabels[networkLabel(n)] != "true" {
			t.Errorf("network %s: %+v", n, pol.Spec)
		}
	}
	peers := policyByName(pols, policyEgressPeers)
	if peers == nil || len(peers.Spec.Egress) != 2 || peers.Spec.Egress[1].To[1].IPBlock.CIDR != "10.244.0.1/32" {
		t.Fatalf("egress of internal-only services: %+v", peers)
	}
	// Open egress: anywhere but the denied addresses, by family; the sample's pods and DNS.
	open := policyByName(pols, policyEgress)
	if open == nil || len(open.Spec.PodSelector.MatchExpressions) != 1 || open.Spec.PodSelector.MatchExpressions[0].Key != egressLabel ||
		open.Spec.PodSelector.MatchExpressions[0].Operator != metav1.LabelSelectorOpDoesNotExist || len(open.Spec.Egress) != 3 {
		t.Fatalf("egress of open services: %+v", open)
	}
	blocks := open.Spec.Egress[0].To
	if len(blocks) != 2 || blocks[0].IPBlock.CIDR != "0.0.0.0/0" || !slices.Equal(blocks[0].IPBlock.Except, []string{"10.213.0.0/16"}) ||
		blocks[1].IPBlock.CIDR != "::/0" || !slices.Equal(blocks[1].IPBlock.Except, []string{"fe80::1/128"}) {
		t.Errorf("open egress blocks: %+v", blocks)
	}
	if open.Spec.Egress[1].To[0].PodSelector == nil || open.Spec.Egress[2].To[1].IPBlock.CIDR != "10.244.0.1/32" || len(open.Spec.Egress[2].Ports) != 2 {
		t.Errorf("open egress to the sample's pods and DNS: %+v", open.Spec.Egress[1:])
	}
	none := policyByName(pols, policyEgressNone)
	if none == nil || len(none.Spec.Egress) != 0 || none.Spec.PolicyTypes[0] != netv1.PolicyTypeEgress {
		t.Fatalf("egress of network_mode none: %+v", none)
	}

	podLabels := func(svc string) map[string]string {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if err := networkPodLabels(p, p.Services[svc], pod); err != nil {
			t.Fatal(err)
		}
		return pod.Labels
	}
	if l := podLabels("default"); l[networkLabel("front")] != "true" || l[networkLabel("back")] != "true" || l[egressLabel] != "" {
		t.Errorf("default's labels %v", l)
	}
	if l := podLabels("vault"); l[networkLabel("secret")] != "true" || l[egressLabel] != egressPeers {
		t.Errorf("vault's labels %v", l)
	}
	if l := podLabels("plain"); l[networkLabel("default")] != "true" {
		t.Errorf("a service without networks is on the default network: %v", l)
	}
	if l := podLabels("offline"); len(l) != 1 || l[egressLabel] != egressNone {
		t.Errorf("offline's labels %v", l)
	}

	for _, mode := range []string{"host", "service:web", "container:abc"} {
		q := load(t, "", "services:\n  a: {image: x, network_mode: \""+mode+"\"}\n  web: {image: x}\n")
		if _, err := networkPolicies(q, confinement{}); !errors.Is(err, ErrNotSupported) || !errors.Is(err, errdefs.ErrPrerequisite) {
			t.Errorf("network_mode %s: %v", mode, err)
		}
	}
}

func TestResources(t *testing.T) {
	p := load(t, "", `
services:
  limits:
    image: x
    cpus: 1.5
    mem_limit: 256m
    mem_reservation: 64m
    pids_limit: 100
  deploy:
    image: x
    deploy:
      resources:
        limits: {cpus: "0.5", memory: 128m, pids: 50}
        reservations: {cpus: "2", memory: 32m}
  quota:
    image: x
    cpu_quota: 50000
  none: {image: x}
`)
	check := func(svc string, lim, req map[corev1.ResourceName]string) {
		t.Helper()
		r := resources(p.Services[svc])
		for _, c := range []struct {
			got  corev1.ResourceList
			want map[corev1.ResourceName]string
		}{{r.Limits, lim}, {r.Requests, req}} {
			if len(c.got) != len(c.want) {
				t.Errorf("%s: %v, want %v", svc, c.got, c.want)
			}
			for k, v := range c.want {
				if q := c.got[k]; q.String() != v {
					t.Errorf("%s: %s %s, want %s", svc, k, q.String(), v)
				}
			}
		}
	}
	// A limit without a reservation requests nothing, written out (else the limit is copied).
	check("limits", map[corev1.ResourceName]string{"cpu": "1500m", "memory": "256Mi"}, map[corev1.ResourceName]string{"cpu": "0", "memory": "64Mi"})
	// A reservation above its limit is cut to the limit.
	check("deploy", map[corev1.ResourceName]string{"cpu": "500m", "memory": "128Mi"}, map[corev1.ResourceName]string{"cpu": "500m", "memory": "32Mi"})
	check("quota", map[corev1.ResourceName]string{"cpu": "500m"}, map[corev1.ResourceName]string{"cpu": "0"})
	check("none", nil, nil)
	if pidsLimit(p.Services["limits"]) != 100 || pidsLimit(p.Services["deploy"]) != 50 {
		t.Error("pids limits")
	}
}

func TestVolumes(t *testing.T) {
	p := load(t, "", `
services:
  a:
    image: x
    volumes:
      - shared:/data
      - type: tmpfs
        target: /scratch
        tmpfs: {size: 1048576}
      - /anon
    tmpfs: ["/run:size=64m,mode=1777"]
    shm_size: 128m
  b:
    image: x
    volumes: ["shared:/data:ro", "own:/own"]
  c: {image: x}
volumes:
  shared: {}
  own: {}
`)
	st := storage{} // the cluster's default class
	mounted := func(svc string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{}}}}
		if err := podVolumes(p, p.Services[svc], pod, st); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	volumeAt := func(pod *corev1.Pod, target string) corev1.Volume {
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.MountPath == target {
				for _, v := range pod.Spec.Volumes {
					if v.Name == m.Name {
						return v
					}
				}
			}
		}
		t.Fatalf("nothing mounted at %s: %+v", target, pod.Spec)
		return corev1.Volume{}
	}
	a := mounted("a")
	vols := map[string]corev1.Volume{}
	for _, v := range a.Spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range a.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m := mounts["/data"]; vols[m.Name].PersistentVolumeClaim == nil || vols[m.Name].PersistentVolumeClaim.ClaimName != "shared" {
		t.Errorf("named volume: %+v %+v", m, vols[m.Name])
	}
	for target, size := range map[string]string{"/scratch": "1Mi", "/run": "64Mi", "/dev/shm": "128Mi"} {
		ed := vols[mounts[target].Name].EmptyDir
		if ed == nil || ed.Medium != corev1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.String() != size {
			t.Errorf("tmpfs %s: %+v", target, ed)
		}
	}
	if ed := vols[mounts["/anon"].Name].EmptyDir; ed == nil || ed.Medium != "" {
		t.Errorf("anonymous volume: %+v", ed)
	}
	if a.Labels[colocateLabel] != "true" || a.Spec.Affinity == nil || a.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname {
		t.Errorf("a pod with a named volume is not kept beside the others: %v %+v", a.Labels, a.Spec.Affinity)
	}
	if b := mounted("b"); !b.Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Error("read-only named volume mounted read-write")
	}
	if c := mounted("c"); c.Spec.Affinity != nil || c.Labels[colocateLabel] != "" {
		t.Error("a pod without volumes is constrained")
	}

	claims, err := volumeClaims(p, st)
	if err != nil || len(claims) != 2 || claims[0].Spec.StorageClassName != nil || claims[0].Spec.VolumeName != "" {
		t.Errorf("default class: %+v %v", claims, err)
	}
	if claims, err := volumeClaims(p, storage{class: ptr("fast")}); err != nil || *claims[1].Spec.StorageClassName != "fast" {
		t.Errorf("given class: %+v %v", claims, err)
	}

	// No StorageClass: a volume one service mounts is its pod's emptyDir; one several share is
	// a directory under the volume root, never /tmp; no claim at all.
	st = storage{local: true, root: "/var/lib/cbx/volumes"}
	if claims, err := volumeClaims(p, st); err != nil || len(claims) != 0 {
		t.Errorf("claims without a class: %+v %v", claims, err)
	}
	b := mounted("b")
	if v := volumeAt(b, "/own"); v.EmptyDir == nil {
		t.Errorf("a volume of one service: %+v", v)
	}
	hp := volumeAt(b, "/data").HostPath
	if hp == nil || hp.Path != "/var/lib/cbx/volumes/"+p.Name+"/shared" || *hp.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("a shared volume: %+v", hp)
	}
	if b.Labels[colocateLabel] != "true" {
		t.Error("the pods sharing a directory are not kept on one node")
	}
	if dir, err := sharedDir(p, st); err != nil || dir != "/var/lib/cbx/volumes/"+p.Name {
		t.Errorf("shared directory %q, %v", dir, err)
	}
	one := load(t, "", "services:\n  a: {image: x, volumes: [\"v:/v\"]}\nvolumes:\n  v: {}\n")
	if dir, err := sharedDir(one, storage{local: true}); err != nil || dir != "" {
		t.Errorf("a volume of one service needs no volume root: %q, %v", dir, err)
	}
	_, err = sharedDir(p, storage{local: true})
	if !errors.Is(err, errdefs.ErrPrerequisite) || !strings.Contains(err.Error(), "shared by services a, b") || !strings.Contains(err.Error(), EnvVolumeRoot) {
		t.Errorf("a shared volume without a volume root: %v", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{}}}}
	if err := podVolumes(p, p.Services["a"], pod, storage{local: true}); !errors.Is(err, errdefs.ErrPrerequisite) {
		t.Errorf("mount a shared volume without a volume root: %v", err)
	}

	ext := load(t, "", "services:\n  a: {image: x, volumes: [\"vol:/v\"]}\nvolumes:\n  vol: {external: true}\n")
	if _, err := volumeClaims(ext, storage{}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("external volume: %v", err)
	}
}

func TestBinds(t *testing.T) {
	task := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(task, "tests", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(task, "tests", "sub", "t.sh"), []byte("#!/bin/sh\necho ok\n"), 0o750))
	must(os.WriteFile(filepath.Join(task, "flag.txt"), []byte("flag{x}"), 0o600))
	must(os.Symlink("sub/t.sh", filepath.Join(task, "tests", "link")))
	empty := t.TempDir()
	full := t.TempDir()
	must(os.WriteFile(filepath.Join(full, "secret"), []byte("s"), 0o600))

	p := load(t, task, `
services:
  a:
    image: x
    volumes:
      - ./tests:/tests:ro
      - ./flag.txt:/flag.txt
      - `+empty+`:/logs
      - ./missing:/missing
`)
	binds, err := bindsOf(p, p.Services["a"])
	if err != nil || len(binds) != 4 {
		t.Fatalf("binds %+v, %v", binds, err)
	}
	if !binds[0].readOnly || binds[0].file || !binds[1].file || !binds[3].missing {
		t.Errorf("binds %+v", binds)
	}
	var buf bytes.Buffer
	must(writeBinds(&buf, binds))
	got := map[string]*tar.Header{}
	content := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got[h.Name] = h
		data, _ := io.ReadAll(tr)
		content[h.Name] = string(data)
	}
	for name, want := range map[string]string{"b0/sub/t.sh": "#!/bin/sh\necho ok\n", "b1/file": "flag{x}"} {
		if content[name] != want {
			t.Errorf("%s: %q, want %q (archive %v)", name, content[name], want, slices.Sorted(maps.Keys(got)))
		}
	}
	if h := got["b0/sub/t.sh"]; h == nil || h.Mode&0o777 != 0o750 || h.Uname != "" || h.Uid != os.Getuid() {
		t.Errorf("t.sh header %+v", h)
	}
	if h := got["b0/link"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "sub/t.sh" {
		t.Errorf("symbolic link %+v", h)
	}
	for _, dir := range []string{"b0/", "b2/", "b3/", "b1/"} {
		if h := got[dir]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: %+v", dir, h)
		}
	}

	// A directory with content outside the task directory, and a socket, do not map.
	out := load(t, task, "services:\n  a:\n    image: x\n    volumes: [\""+full+":/x\"]\n")
	if _, err := bindsOf(out, out.Services["a"]); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "outside the task directory") {
		t.Errorf("bind from outside: %v", err)
	}
	if _, err := os.Stat("/var/run/docker.sock"); err == nil {
		sock := load(t, task, "services:\n  a:\n    image: x\n    volumes: [\"/var/run/docker.sock:/var/run/docker.sock\"]\n")
		if _, err := bindsOf(sock, sock.Services["a"]); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "socket") {
			t.Errorf("socket bind: %v", err)
		}
	}
}

func TestContainerPorts(t *testing.T) {
	p := load(t, "", `
services:
  a:
    image: x
    ports: ["1337:1337", "127.0.0.1::80", "53:53/udp", "1337"]
`)
	got := containerPorts(p.Services["a"])
	want := []corev1.ContainerPort{{ContainerPort: 1337, Protocol: "TCP"}, {ContainerPort: 80, Protocol: "TCP"}, {ContainerPort: 53, Protocol: "UDP"}}
	if !slices.Equal(got, want) {
		t.Errorf("ports %+v, want %+v", got, want)
	}
}

// Names no Service can carry reach only the services that share a network with their owner:
// as hostAliases once the owner has an address and the name is a DNS subdomain, the others
// through /etc/hosts.
func TestHostsOnlyNames(t *testing.T) {
	p := load(t, "", `
services:
  victim:
    image: x
    container_name: my_box
    networks:
      shared:
        aliases: [locktalk.chals.local, plain]
  agent:
    image: x
    networks: [shared]
    depends_on: [victim]
  lonely:
    image: x
    networks: [other]
    depends_on: [victim]
networks:
  shared: {}
  other: {}
`)
	names := hostsOnlyNames(p)
	want := []hostName{{"victim", "locktalk.chals.local"}, {"victim", "my_box"}}
	for _, consumer := range []string{"agent", "victim"} {
		if got := names[consumer]; !slices.Equal(got, want) {
			t.Errorf("%s resolves %v, want %v", consumer, got, want)
		}
	}
	if got := names["lonely"]; len(got) != 0 {
		t.Errorf("a service on another network resolves %v", got)
	}
	pods := map[string]*corev1.Pod{"victim": {Status: corev1.PodStatus{PodIP: "10.0.0.7"}}}
	got := hostAliases(p, "agent", pods)
	if len(got) != 1 || got[0].IP != "10.0.0.7" || !slices.Equal(got[0].Hostnames, []string{"locktalk.chals.local"}) {
		t.Errorf("host aliases %+v: want the dotted alias only (my_box is no DNS subdomain)", got)
	}
	if got := hostAliases(p, "agent", nil); len(got) != 0 {
		t.Errorf("host aliases before the victim has an address: %+v", got)
	}

	if c := gate(p, "agent", "reg/base:1"); c.Name != gateName || !slices.Contains(c.Command, "victim") ||
		!slices.Equal(c.SecurityContext.Capabilities.Add, []corev1.Capability{"NET_RAW"}) {
		t.Errorf("agent's start gate %+v, want one pinging the victim by name with NET_RAW alone", c)
	}
	if got := gateTargets(p, "lonely"); len(got) != 0 {
		t.Errorf("a dependency on no shared network is pinged: %v", got)
	}
	if got := aliasedDependencies(p, "agent"); !slices.Equal(got, []string{"victim"}) {
		t.Errorf("agent waits for the addresses of %v, want the victim's (its dotted alias)", got)
	}
	if !needsGate(p, "agent") || needsGate(p, "victim") {
		t.Error("the gate goes to the services with dependencies, and only to them")
	}
}

// The start gate pings the dependencies a service may talk to, by name: not a one-shot it
// waits to see finish (gone once it exited, it would hold the gate to its deadline), not one
// on another network, and nothing without egress.
func TestGateTargets(t *testing.T) {
	p := load(t, "", `
services:
  app:
    image: x
    depends_on:
      db: {condition: service_healthy}
      cache: {condition: service_started}
      migrate: {condition: service_completed_successfully}
      other: {condition: service_started}
  db: {image: x}
  cache: {image: x}
  migrate: {image: x}
  other: {image: x, networks: [elsewhere]}
  offline:
    image: x
    network_mode: none
    depends_on: [db]
networks:
  elsewhere: {}
`)
	if got := gateTargets(p, "app"); !slices.Equal(got, []string{"cache", "db"}) {
		t.Errorf("app's gate pings %v, want cache and db", got)
	}
	if got := gateTargets(p, "offline"); len(got) != 0 {
		t.Errorf("a service without network pings %v", got)
	}
	if c := gate(p, "app", "reg/base:1"); !slices.Contains(c.Command, "db") || slices.Contains(c.Command, "migrate") {
		t.Errorf("gate command %q", c.Command)
	}
}
