package kubernetes

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Markers. Unlike a Docker container's labels, a namespace's labels and annotations can
// change, so a sample's hand-overs are recorded on its namespace itself:
//
//   - detached: the owner label and annotation become "detached";
//   - warm: the pool label becomes "warm" (it is "pooled" from the start), and annotations
//     hold the task configuration's fingerprint, whether the pool is shared, who keeps it and
//     since when;
//   - a take turns "warm" back into "pooled" with an update conditioned on the namespace's
//     resourceVersion: of any number of takers, in any number of processes, the API server
//     lets exactly one update win (the others get a conflict, read the namespace again and
//     find it no longer warm);
//   - the claim records the taker: the pool label becomes "claimed", the sample annotation
//     the id its SampleInit chose, and annotationClaimer its owner (whose teardown then finds
//     the sample too).
const (
	annotationWarmAt   = annotationPrefix + "warm-at"
	annotationWarmedBy = annotationPrefix + "warmed-by"
)

// patchNamespace merge-patches project's namespace's labels and annotations; a gone namespace
// is ErrNotFound.
func (b *Backend) patchNamespace(ctx context.Context, op, project string, lbl, ann map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": lbl, "annotations": ann}})
	if err != nil {
		return err
	}
	_, err = b.cs.CoreV1().Namespaces().Patch(ctx, project, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return errdefs.Wrap(errdefs.ErrNotFound, err, fmt.Sprintf("kubernetes: %s %s", op, project))
	}
	if err != nil {
		return fmt.Errorf("kubernetes: %s %s: %w", op, project, err)
	}
	return nil
}

// MarkDetached hands the sample over: its namespace's owner becomes "detached", which no
// owner's teardown or stale sweep selects.
func (b *Backend) MarkDetached(ctx context.Context, m backend.Marker) error {
	return b.patchNamespace(ctx, "detach", m.Project,
		map[string]string{labels.LabelOwner: labels.OwnerDetached}, map[string]string{labels.LabelOwner: labels.OwnerDetached})
}

// MarkWarm puts the sample in its task's pool.
func (b *Backend) MarkWarm(ctx context.Context, m backend.WarmMarker) error {
	ann := map[string]string{
		labels.LabelPoolConfig: m.Fingerprint,
		annotationWarmAt:       time.Now().UTC().Format(time.RFC3339Nano),
		annotationWarmedBy:     m.Owner,
	}
	if m.Shared {
		ann[labels.LabelPoolShared] = "true"
	}
	return b.patchNamespace(ctx, "mark warm", m.Project, map[string]string{labels.LabelPool: labels.PoolWarm}, ann)
}

// Take is the atomic step of a claim: warm becomes pooled for exactly one caller.
func (b *Backend) Take(ctx context.Context, project string) (bool, error) {
	for {
		ns, err := b.cs.CoreV1().Namespaces().Get(ctx, project, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("kubernetes: claim %s: %w", project, err)
		}
		if ns.Labels[labels.LabelPool] != labels.PoolWarm || ns.DeletionTimestamp != nil {
			return false, nil
		}
		ns.Labels[labels.LabelPool] = labels.PoolPooled
		delete(ns.Annotations, annotationWarmAt)
		_, err = b.cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsConflict(err):
			// Someone else changed it first: read it again.
		case apierrors.IsNotFound(err):
			return false, nil
		default:
			return false, fmt.Errorf("kubernetes: claim %s: %w", project, err)
		}
	}
}

// RecordClaim records who took the sample Take gave.
func (b *Backend) RecordClaim(ctx context.Context, m backend.Marker) error {
	return b.patchNamespace(ctx, "record the claim of", m.Project,
		map[string]string{labels.LabelPool: labels.PoolClaimed, labels.LabelSample: labelValue(m.Sample)},
		map[string]string{labels.LabelSample: m.Sample, annotationClaimer: m.Owner})
}

// Claim takes a warm sample and records the claim: true for exactly one caller.
func (b *Backend) Claim(ctx context.Context, m backend.Marker) (bool, error) {
	won, err := b.Take(ctx, m.Project)
	if !won || err != nil {
		return won, err
	}
	return true, b.RecordClaim(ctx, m)
}

// WarmProjects lists the free pooled samples of task, oldest first.
func (b *Backend) WarmProjects(ctx context.Context, task string) ([]backend.WarmProject, error) {
	list, err := b.cs.CoreV1().Namespaces().List(ctx, listOpts(selector([]string{labels.ManagedFilter,
		labels.LabelPool + "=" + labels.PoolWarm, labels.LabelTask + "=" + task})))
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list warm samples of %s: %w", task, err)
	}
	var out []backend.WarmProject
	for _, ns := range list.Items {
		if w, ok := warmProject(&ns, task); ok {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b backend.WarmProject) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Project, b.Project))
	})
	return out, nil
}

func warmProject(ns *corev1.Namespace, task string) (backend.WarmProject, bool) {
	a := ns.Annotations
	if a[labels.LabelTask] != task || ns.DeletionTimestamp != nil {
		return backend.WarmProject{}, false
	}
	created, _ := time.Parse(time.RFC3339Nano, a[annotationWarmAt])
	return backend.WarmProject{Created: created, WarmMarker: backend.WarmMarker{
		Marker:      backend.Marker{Project: ns.Name, Task: task, Sample: a[labels.LabelSample], Owner: a[annotationWarmedBy]},
		Fingerprint: a[labels.LabelPoolConfig], Shared: a[labels.LabelPoolShared] == "true",
	}}, true
}
