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
//     mounting it shares. The claim asks the StorageClass the backend is given, else the
//     cluster's default one. A cluster with neither (a bare single-node cluster such as
//     `make k8s` brings up) gets a hostPath PersistentVolume made for the claim, under
//     /tmp/composebox-volumes-* on the node, with the Delete reclaim policy: the cluster's
//     volume controller removes the directory once the namespace, and so the claim, is gone.
//     That works where the controller runs on the node itself, which is what such a cluster
//     is. The pods of a sample that mount named volumes are scheduled onto one node
//     (ReadWriteOnce claims allow no more).
//   - An anonymous volume is an emptyDir of the pod, as it is the container's alone on Docker.
//   - tmpfs (a tmpfs volume, a `tmpfs:` entry, shm_size) is an in-memory emptyDir, its size
//     the emptyDir's limit.
//   - A bind is a copy: see binds.go.
//
// Docker fills an empty named volume with what the image has at its mount point; a claim
// starts empty.

const (
	// volumeSize is what a claim asks for: compose says nothing of a volume's size.
	volumeSize = "1Gi"
	// volumeHostRoot is the prefix of the directories the fallback hostPath volumes use: the
	// volume controller deletes a hostPath volume only under /tmp.
	volumeHostRoot = "/tmp/composebox-volumes-"
	// colocateLabel marks the pods that mount named volumes; their affinity keeps them on one
	// node.
	colocateLabel = "composebox.dev/volumes"
	// composeVolumeLabel names the volume a claim is, as compose labels Docker's volumes.
	composeVolumeLabel = "com.docker.compose.volume"
	// defaultClassAnnotation marks a cluster's default StorageClass.
	defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
)

// claimName is the claim a named volume's key becomes.
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

// storage is how a project's claims are provisioned: a class (nil: the cluster's default), or
// fallback hostPath volumes.
type storage struct {
	class    *string
	hostPath bool
}

// storageFor picks the StorageClass: the backend's, else the cluster's default, else none
// (the hostPath fallback).
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
	return storage{class: ptr(""), hostPath: true}, nil
}

// volumeObjects are a project's claims and, with the hostPath fallback, their volumes.
func volumeObjects(p *types.Project, st storage) ([]*corev1.PersistentVolumeClaim, []*corev1.PersistentVolume, error) {
	var claims []*corev1.PersistentVolumeClaim
	var vols []*corev1.PersistentVolume
	lbl := map[string]string{labels.LabelManaged: "true", labels.ComposeProjectLabel: labelValue(p.Name)}
	size := resource.MustParse(volumeSize)
	for _, key := range usedVolumes(p) {
		cfg, ok := p.Volumes[key]
		if !ok {
			return nil, nil, errdefs.New(errdefs.ErrInvalidConfig, "kubernetes up "+p.Name+": volume "+key+" is not declared")
		}
		if cfg.External {
			return nil, nil, notSupported("external volume " + key + " (a sample's volumes are its own)")
		}
		if cfg.Driver != "" && cfg.Driver != "local" {
			return nil, nil, notSupported("volume " + key + " with driver " + cfg.Driver)
		}
		l := maps.Clone(lbl)
		l[composeVolumeLabel] = labelValue(key)
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claimName(key), Labels: l},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				StorageClassName: st.class,
			},
		}
		if st.hostPath {
			name := hostVolumeName(p.Name, key)
			claim.Spec.VolumeName = name
			vols = append(vols, &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
					StorageClassName:              "",
					ClaimRef:                      &corev1.ObjectReference{Namespace: p.Name, Name: claim.Name},
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
						Path: volumeHostRoot + name, Type: ptr(corev1.HostPathDirectoryOrCreate)}},
				},
			})
		}
		claims = append(claims, claim)
	}
	return claims, vols, nil
}

// hostVolumeName is the cluster-wide name of a fallback volume: the project's and the key's,
// made unique by a hash when they have to be cut.
func hostVolumeName(project, key string) string {
	name := dnsName(project + "-" + key)
	if len(name) > 63 || name != project+"-"+key {
		sum := sha256.Sum256([]byte(project + "\x00" + key))
		name = strings.TrimRight(name[:min(len(name), 50)], "-") + "-" + hex.EncodeToString(sum[:6])
	}
	return name
}

// createVolumes makes the project's claims (and fallback volumes) before its pods.
func (b *Backend) createVolumes(ctx context.Context, p *types.Project) error {
	if len(usedVolumes(p)) == 0 {
		return nil
	}
	st, err := b.storageFor(ctx)
	if err != nil {
		return err
	}
	claims, vols, err := volumeObjects(p, st)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if _, err := b.cs.CoreV1().PersistentVolumes().Create(ctx, v, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes up %s: create volume %s: %w", p.Name, v.Name, err)
		}
	}
	for _, c := range claims {
		if _, err := b.cs.CoreV1().PersistentVolumeClaims(p.Name).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubernetes up %s: create volume claim %s: %w", p.Name, c.Name, err)
		}
	}
	return nil
}

// podVolumes mounts a service's named and anonymous volumes and its tmpfs into its pod.
func podVolumes(svc types.ServiceConfig, pod *corev1.Pod) error {
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
			named = true
			claim := claimName(v.Source)
			add("volume-"+claim, corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}, m)
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

// removeVolumes waits, after the namespace is gone, for the fallback hostPath volumes of the
// project to be deleted by the cluster's volume controller (which removes their directories
// first); one the controller failed on is deleted here. It returns how many there were.
func (b *Backend) removeVolumes(ctx context.Context, project string) (int, error) {
	sel := listOpts(labels.LabelManaged + "=true," + labels.ComposeProjectLabel + "=" + labelValue(project))
	list, err := b.cs.CoreV1().PersistentVolumes().List(ctx, sel)
	if err != nil || len(list.Items) == 0 {
		return 0, err
	}
	n := len(list.Items)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var left []string
		for _, pv := range list.Items {
			if pv.Status.Phase == corev1.VolumeFailed {
				_ = b.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
			}
			left = append(left, pv.Name)
		}
		if len(left) == 0 {
			return n, nil
		}
		w, err := b.cs.CoreV1().PersistentVolumes().Watch(ctx, metav1.ListOptions{LabelSelector: sel.LabelSelector, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return n, fmt.Errorf("kubernetes down %s: watch volumes: %w", project, err)
		}
		for range w.ResultChan() {
			break // any change: list again
		}
		w.Stop()
		if ctx.Err() != nil {
			return n, errdefs.New(errdefs.ErrTimeout, fmt.Sprintf("kubernetes down %s: volumes %s not deleted by the cluster", project, strings.Join(left, ", ")))
		}
		if list, err = b.cs.CoreV1().PersistentVolumes().List(ctx, sel); err != nil {
			return n, fmt.Errorf("kubernetes down %s: list volumes: %w", project, err)
		}
	}
}
