package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
)

// Volumes on a cluster:
//   - A named volume is a PersistentVolumeClaim of the sample's namespace, which every service
//     mounting it shares, where the cluster can provision one: the claim asks the StorageClass
//     the backend is given, else the cluster's default one. The pods of a sample that mount
//     such volumes are scheduled onto one node (ReadWriteOnce claims allow no more).
//   - A cluster with neither (a bare single-node cluster such as `make k8s` brings up) has no
//     volume a sample could own, and a directory on the node is all there is. An agent that is
//     root in its container can leave a setuid binary or a device node in it, so the node must
//     keep it out of reach of its own users: a volume one service mounts is an emptyDir of its
//     pod (the kubelet's, removed with the pod); one several services share is a directory
//     under the volume root (Options.VolumeRoot), which the node's operator makes a directory
//     only root can traverse, mounted nosuid and nodev (`make k8s` does). Never /tmp, which
//     every user of the node traverses. Without a volume root, a shared volume fails
//     `prerequisite` naming the fix. The directory goes at `down`: a pod of composebox's own
//     removes it once the sample's pods are gone (removeVolumeDir).
//   - An anonymous volume is an emptyDir of the pod, as it is the container's alone on Docker.
//   - tmpfs (a tmpfs volume, a `tmpfs:` entry, shm_size) is an in-memory emptyDir, its size
//     the emptyDir's limit.
//   - A bind is a copy: see binds.go.
//
// Docker fills an empty named volume with what the image has at its mount point; a claim or a
// directory starts empty.

const (
	// volumeSize is what a claim asks for: compose says nothing of a volume's size.
	volumeSize = "1Gi"
	// colocateLabel marks the pods that mount named volumes; their affinity keeps them on one
	// node.
	colocateLabel = "composebox.dev/volumes"
	// composeVolumeLabel names the volume a claim is, as compose labels Docker's volumes.
	composeVolumeLabel = "com.docker.compose.volume"
	// defaultClassAnnotation marks a cluster's default StorageClass.
	defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	// annotationVolumeDir, on a sample's namespace, is the node directory of its shared
	// volumes (under the volume root), and annotationVolumeImage the image that removes it.
	annotationVolumeDir   = annotationPrefix + "volume-dir"
	annotationVolumeImage = annotationPrefix + "volume-image"
	// volumeCleanup is the pod that removes a sample's volume directory.
	volumeCleanup = "composebox-volume-cleanup"
)

// claimName is the claim (or directory) a named volume's key becomes.
func claimName(key string) string {
	if n := dnsName(key); n != "" {
		return n
	}
	sum := sha256.Sum256([]byte(key))
	return "volume-" + hex.EncodeToString(sum[:6])
}

// usedVolumes are the named volumes the project's services mount, sorted.
func usedVolumes(p *types.Project) []string {
	used := map[string]bool{}
	for _, svc := range p.Services {
		for _, v := range svc.Volumes {
			if v.Type == types.VolumeTypeVolume && v.Source != "" {
				used[v.Source] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(used))
}

// volumeUsers are the services that mount named volume key, sorted.
func volumeUsers(p *types.Project, key string) []string {
	var out []string
	for name, svc := range p.Services {
		if slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Type == types.VolumeTypeVolume && v.Source == key }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// storage is how a project's named volumes are provisioned: claims of a class (nil: the
// cluster's default), or, on a cluster without one (local), emptyDirs and directories under
// root.
type storage struct {
	class *string
	local bool
	root  string
}

// storageFor picks the StorageClass: the backend's, else the cluster's default, else none
// (local volumes).
func (b *Backend) storageFor(ctx context.Context) (storage, error) {
	if b.storageClass != "" {
		return storage{class: ptr(b.storageClass)}, nil
	}
	list, err := b.cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return storage{}, fmt.Errorf("kubernetes: list storage classes: %w", err)
	}
	if slices.ContainsFunc(list.Items, func(c storagev1.StorageClass) bool { return c.Annotations[defaultClassAnnotation] == "true" }) {
		return storage{}, nil
	}
	return storage{local: true, root: b.volumeRoot}, nil
}

// sharedDir is the node directory of a project's shared volumes under the volume root, ""
// when no volume is shared (or they are claims).
func sharedDir(p *types.Project, st storage) (string, error) {
	if !st.local {
		return "", nil
	}
	for _, key := range usedVolumes(p) {
		if users := volumeUsers(p, key); len(users) > 1 {
			if st.root == "" {
				return "", errdefs.Wrap(errdefs.ErrPrerequisite, ErrNotSupported, fmt.Sprintf(
					"kubernetes: volume %s is shared by services %s and the cluster has no StorageClass: give the backend a StorageClass, or a volume root (%s: a directory on the node only root can traverse, mounted nosuid,nodev)",
					key, strings.Join(users, ", "), EnvVolumeRoot))
			}
			return path.Join(st.root, p.Name), nil
		}
	}
	return "", nil
}

// volumeClaims are a project's claims, where a class provisions them.
func volumeClaims(p *types.Project, st storage) ([]*corev1.PersistentVolumeClaim, error) {
	var claims []*corev1.PersistentVolumeClaim
	lbl := map[string]string{labels.LabelManaged: "true", labels.ComposeProjectLabel: labelValue(p.Name)}
	size := resource.MustParse(volumeSize)
	for _, key := range usedVolumes(p) {
		cfg, ok := p.Volumes[key]
		if !ok {
			return nil, errdefs.New(errdefs.ErrInvalidConfig, "kubernetes up "+p.Name+": volume "+key+" is not declared")
		}
		if cfg.External {
			return nil, notSupported("external volume " + key + " (a sample's volumes are its own)")
		}
		if cfg.Driver != "" && cfg.Driver != "local" {
			return nil, notSupported("volume " + key + " with driver " + cfg.Driver)
		}
		if st.local {
			continue
		}
		l := maps.Clone(lbl)
		l[composeVolumeLabel] = labelValue(key)
		claims = append(claims, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claimName(key), Labels: l},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				StorageClassName: st.class,
			},
		})
	}
	return claims, nil
}

// volumeAnnotations are what a namespace records of its volumes before any pod mounts them:
// the directory of its shared volumes and the image that removes it at down.
func (b *Backend) volumeAnnotations(ctx context.Context, p *types.Project) (map[string]string, error) {
	if len(usedVolumes(p)) == 0 {
		return nil, nil
	}
	st, err := b.storageFor(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := sharedDir(p, st)
	if err != nil || dir == "" {
		return nil, err
	}
	ref, err := b.baseRef(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{annotationVolumeDir: dir, annotationVolumeImage: ref}, nil
}

// createVolumes makes the project's claims before its pods.
func (b *Backend) createVolumes(ctx context.Context, p *types.Project) error {
	if len(usedVolumes(p)) == 0 {
		return nil
	}
	st, err := b.storageFor(ctx)
	if err != nil {
		return err
	}
	claims, err := volumeClaims(p, st)
	if err != nil {
		return err
	}
	for _, c := range claims {
		if _, err := b.cs.CoreV1().PersistentVolumeClaims(p.Name).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes up %s: create volume claim %s: %w", p.Name, c.Name, err)
		}
	}
	return nil
}

// podVolumes mounts a service's named and anonymous volumes and its tmpfs into its pod; st
// says how named volumes are provisioned.
func podVolumes(p *types.Project, svc types.ServiceConfig, pod *corev1.Pod, st storage) error {
	c := &pod.Spec.Containers[0]
	add := func(name string, src corev1.VolumeSource, m corev1.VolumeMount) {
		if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
		}
		m.Name = name
		c.VolumeMounts = append(c.VolumeMounts, m)
	}
	memory := func(size int64) corev1.VolumeSource {
		ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if size > 0 {
			ed.SizeLimit = resource.NewQuantity(size, resource.BinarySI)
		}
		return corev1.VolumeSource{EmptyDir: ed}
	}
	named := false
	for i, v := range svc.Volumes {
		target := path.Clean(v.Target)
		switch v.Type {
		case types.VolumeTypeBind:
			continue // binds.go
		case types.VolumeTypeTmpfs:
			var size int64
			if v.Tmpfs != nil {
				size = int64(v.Tmpfs.Size)
			}
			add(fmt.Sprintf("tmpfs-%d", i), memory(size), corev1.VolumeMount{MountPath: target, ReadOnly: v.ReadOnly})
		case types.VolumeTypeVolume:
			m := corev1.VolumeMount{MountPath: target, ReadOnly: v.ReadOnly}
			if v.Volume != nil {
				m.SubPath = v.Volume.Subpath
			}
			if v.Source == "" {
				add(fmt.Sprintf("anonymous-%d", i), corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, m)
				continue
			}
			claim := claimName(v.Source)
			src := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
			if st.local {
				dir, err := sharedDir(p, st)
				if err != nil {
					return err
				}
				if len(volumeUsers(p, v.Source)) == 1 {
					add("volume-"+claim, corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, m)
					continue
				}
				src = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path.Join(dir, claim), Type: ptr(corev1.HostPathDirectoryOrCreate)}}
			}
			named = true
			add("volume-"+claim, src, m)
		default:
			return notSupported(fmt.Sprintf("service %s: %s volume %s", svc.Name, v.Type, v.Target))
		}
	}
	for i, t := range svc.Tmpfs {
		target, opts, _ := strings.Cut(t, ":")
		add(fmt.Sprintf("tmpfs-opt-%d", i), memory(tmpfsSize(opts)), corev1.VolumeMount{MountPath: path.Clean(target)})
	}
	if svc.ShmSize > 0 {
		add("shm", memory(int64(svc.ShmSize)), corev1.VolumeMount{MountPath: "/dev/shm"})
	}
	if named {
		pod.Labels[colocateLabel] = "true"
		together := metav1.LabelSelector{MatchLabels: map[string]string{colocateLabel: "true"}}
		pod.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &together, TopologyKey: corev1.LabelHostname,
			}},
		}}
	}
	return nil
}

// tmpfsSize reads size= from a tmpfs entry's options (Docker's --tmpfs syntax), 0 without.
func tmpfsSize(opts string) int64 {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			if n, err := units(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// units parses a size as Docker's tmpfs options give it (65536k, 64m, 1g, bytes).
func units(s string) (int64, error) {
	var b types.UnitBytes
	if err := b.DecodeMapstructure(s); err != nil {
		return 0, err
	}
	return int64(b), nil
}

// removeVolumeDir removes the node directory of a sample's shared volumes (its namespace's
// annotationVolumeDir) before the namespace goes: once the sample's pods are gone, so that no
// agent writes into it any more, a pod of composebox's own (the base image, root with only the
// capabilities removing files of any owner needs) removes it from the volume root on the node
// the pods ran on. node is that node ("" lets the scheduler place it: single-node clusters).
func (b *Backend) removeVolumeDir(ctx context.Context, ns *corev1.Namespace, node string, grace int64) error {
	dir, image := ns.Annotations[annotationVolumeDir], ns.Annotations[annotationVolumeImage]
	what := "kubernetes down " + ns.Name + ": remove the volume directory " + dir
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pods := b.cs.CoreV1().Pods(ns.Name)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, listOpts("")); err != nil {
		return fmt.Errorf("%s: delete the pods: %w", what, err)
	}
	if err := b.awaitPods(ctx, ns.Name, func(list []corev1.Pod) bool { return len(list) == 0 }); err != nil {
		return fmt.Errorf("%s: wait for the pods to go: %w", what, err)
	}
	const mount = "/volume-root"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: volumeCleanup, Labels: map[string]string{labels.LabelManaged: "true", labels.ComposeProjectLabel: labelValue(ns.Name)}},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr(false), EnableServiceLinks: ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(1)),
			Containers: []corev1.Container{{
				Name: "remove", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"rm", "-rf", "--", path.Join(mount, path.Base(dir))},
				VolumeMounts: []corev1.VolumeMount{{Name: "volume-root", MountPath: mount}},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)), RunAsNonRoot: ptr(false),
					AllowPrivilegeEscalation: ptr(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"},
						Add: []corev1.Capability{"DAC_OVERRIDE", "FOWNER"}},
				},
			}},
			Volumes: []corev1.Volume{{Name: "volume-root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: path.Dir(dir), Type: ptr(corev1.HostPathDirectory)}}}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var done *corev1.Pod
	err := b.awaitPods(ctx, ns.Name, func(list []corev1.Pod) bool {
		for i := range list {
			if list[i].Name == volumeCleanup && (list[i].Status.Phase == corev1.PodSucceeded || list[i].Status.Phase == corev1.PodFailed) {
				done = &list[i]
			}
		}
		return done != nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if done.Status.Phase != corev1.PodSucceeded {
		return errdefs.New(errdefs.ErrUnavailable, fmt.Sprintf("%s: the removal failed: %s", what, b.logTail(ctx, ns.Name, volumeCleanup)))
	}
	return nil
}

// awaitPods follows the namespace's pods (a list, then a watch, listing again at each change)
// until done says so, or ctx ends.
func (b *Backend) awaitPods(ctx context.Context, ns string, done func([]corev1.Pod) bool) error {
	for {
		list, err := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if done(list.Items) {
			return nil
		}
		w, err := b.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		for range w.ResultChan() {
			break // any change: list again
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
