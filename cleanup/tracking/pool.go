package tracking

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/composebox/composebox/cleanup/labels"
)

// Warm pools. A task may keep ready samples that nobody asked for yet, so that a SampleInit
// takes one instead of starting it. Engine labels cannot change, so a pooled sample's state is
// told by marker volumes in its project, like the detach marker:
//
//   - while it waits in the pool, a warm marker (LabelPool=warm) says it is free to take;
//   - taking it removes the warm marker first. Removing a volume is atomic in the daemon (a
//     second removal of the same name fails with not found), so of any number of claimers, in
//     any number of processes, exactly one wins. Creating a volume is not: a create of an
//     existing name succeeds silently, which is why the claim is a removal;
//   - the winner then records itself in a claim marker (LabelPool=claimed) carrying the sample
//     id the caller chose and the claimer's owner, which List reports as the project's sample.
//
// Only a shared pool's samples may be taken by other processes (the warm marker says so). A
// pool that is not shared has one taker, its keeper, which takes in memory and writes both
// steps afterwards, off the caller's path: the markers then only tell other processes what
// happened.
//
// Both markers carry the project's labels, so RemoveProject removes them with the project, and
// the owner label, so a dead owner's pool is stale like any other sample.

// WarmVolume is the name of project's warm marker volume.
func WarmVolume(project string) string { return markerName(markerWarm, project) }

// ClaimVolume is the name of project's claim marker volume.
func ClaimVolume(project string) string { return markerName(markerClaim, project) }

// MarkWarm puts project in its task's pool: a ready sample free to take. fingerprint names the
// task's configuration, so that only a task of the same configuration takes it; shared lets
// other processes take it.
func MarkWarm(ctx context.Context, c client.APIClient, project, task, sample, owner, fingerprint string, shared bool) error {
	lbl := markerLabels(project, task, sample, owner, labels.PoolWarm)
	lbl[labels.LabelPoolConfig] = fingerprint
	if shared {
		lbl[labels.LabelPoolShared] = "true"
	}
	if err := createMarker(ctx, c, WarmVolume(project), lbl); err != nil {
		return fmt.Errorf("mark %s warm: create marker volume: %w", project, err)
	}
	return nil
}

// Claim takes project out of the pool for sample, on behalf of owner, and records the claim
// (Take, then RecordClaim). It reports false, with no error, when the project was not free:
// someone else took it first, or it is gone. Exactly one of any number of concurrent claims of
// one project wins.
func Claim(ctx context.Context, c client.APIClient, project, task, sample, owner string) (bool, error) {
	won, err := Take(ctx, c, project)
	if !won || err != nil {
		return won, err
	}
	return true, RecordClaim(ctx, c, project, task, sample, owner)
}

// Take is the atomic step of a claim: it removes project's warm marker, and reports false, with
// no error, when there was none to remove.
func Take(ctx context.Context, c client.APIClient, project string) (bool, error) {
	err := c.VolumeRemove(ctx, WarmVolume(project), false)
	switch {
	case errdefs.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim %s: remove warm marker: %w", project, err)
	}
	return true, nil
}

// RecordClaim records who took project: the sample id its taker chose, and the taker's owner.
func RecordClaim(ctx context.Context, c client.APIClient, project, task, sample, owner string) error {
	lbl := markerLabels(project, task, sample, owner, labels.PoolClaimed)
	if err := createMarker(ctx, c, ClaimVolume(project), lbl); err != nil {
		return fmt.Errorf("claim %s: record the claim: %w", project, err)
	}
	return nil
}

// WarmProject is a ready sample in some process's pool, as its warm marker describes it.
type WarmProject struct {
	Project     string
	Task        string
	Sample      string
	Owner       string
	Fingerprint string
	// Shared says processes other than Owner may take it.
	Shared  bool
	Created time.Time
}

// WarmProjects lists the free pooled samples of task, oldest first.
func WarmProjects(ctx context.Context, c client.APIClient, task string) ([]WarmProject, error) {
	f := poolFilter(labels.PoolWarm)
	f.Add("label", labels.LabelTask+"="+task)
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list warm samples of %s: %w", task, err)
	}
	out := make([]WarmProject, 0, len(vols.Volumes))
	for _, v := range vols.Volumes {
		if !isMarker(v.Name, v.Labels, markerWarm) {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, v.Labels[labels.LabelCreated])
		out = append(out, WarmProject{
			Project: v.Labels[labels.ComposeProjectLabel], Task: task, Sample: v.Labels[labels.LabelSample],
			Owner: v.Labels[labels.LabelOwner], Fingerprint: v.Labels[labels.LabelPoolConfig], Shared: v.Labels[labels.LabelPoolShared] == "true", Created: created,
		})
	}
	sortWarm(out)
	return out, nil
}

func markerLabels(project, task, sample, owner, pool string) map[string]string {
	return map[string]string{
		labels.ComposeProjectLabel: project,
		labels.LabelManaged:        "true",
		labels.LabelTask:           task,
		labels.LabelSample:         sample,
		labels.LabelOwner:          owner,
		labels.LabelCreated:        time.Now().UTC().Format(time.RFC3339Nano),
		labels.LabelPool:           pool,
	}
}

// poolState is a project's pool state after seeing one more resource's labels: a claim marker
// wins over a warm marker (the window between the two steps of a claim), and either over the
// plain pooled label.
func poolState(cur string, lbl map[string]string) string {
	rank := map[string]int{"": 0, labels.PoolPooled: 1, labels.PoolWarm: 2, labels.PoolClaimed: 3}
	v := lbl[labels.LabelPool]
	if _, known := rank[v]; !known || rank[v] <= rank[cur] {
		return cur
	}
	return v
}

// poolFilter selects composebox resources whose pool label is value.
func poolFilter(value string) filters.Args {
	return filters.NewArgs(filters.Arg("label", labels.ManagedFilter), filters.Arg("label", labels.LabelPool+"="+value))
}

func sortWarm(w []WarmProject) {
	slices.SortFunc(w, func(a, b WarmProject) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Project, b.Project))
	})
}
