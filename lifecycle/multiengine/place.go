package multiengine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/placement"
	"github.com/composebox/composebox/orchestrator/backend"
)

// Place chooses the engine of a sample (internal/placement): among the engines that answer
// and have room, the least loaded, ties going to one that has the sample's images. Every later
// call about the project goes there. It asks an engine again first when it was last heard from
// a moment too long ago (a stopped engine is then skipped), and counts its samples again now
// and then (those of other processes count too).
func (b *Backend) Place(ctx context.Context, req backend.PlaceRequest) (backend.Placement, error) {
	if req.Project == nil {
		return backend.Placement{}, errdefs.New(errdefs.ErrInvalidConfig, "place sample: no project")
	}
	project := req.Project.Name
	if req.From != "" {
		return b.placeWith(ctx, project, req.From)
	}
	refs := projectImages(req.Project)
	var wg sync.WaitGroup
	for _, m := range b.members {
		wg.Go(func() {
			m.refresh(ctx)
			if !m.isDown() {
				b.probeImages(ctx, m, refs)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return backend.Placement{}, err
	}

	// The choice and its record are one step, so that samples placed at once see each other.
	b.mu.Lock()
	defer b.mu.Unlock()
	snap := make([]placement.Engine, len(b.members))
	for i, m := range b.members {
		snap[i] = m.snapshot(refs)
		snap[i].Unfit = m.unfit(req.Labels)
	}
	d, refusals, ok := placement.Choose(snap)
	if !ok {
		b.projects[project] = nil
		pe := &backend.PlacementError{Project: project}
		for _, r := range refusals {
			pe.Refusals = append(pe.Refusals, backend.Refusal{Engine: r.Engine, Reason: r.Reason})
		}
		return backend.Placement{}, pe
	}
	m := b.members[d.Index]
	m.place(project)
	b.projects[project] = m
	return backend.Placement{Engine: m.name, Endpoint: m.b.Endpoint(), Reason: d.Reason}, nil
}

// placeWith places project on the engine of from, which holds the state it starts from: no
// other engine could start it. That engine must answer and have room.
func (b *Backend) placeWith(ctx context.Context, project, from string) (backend.Placement, error) {
	m, err := b.projectMember(ctx, from)
	if err != nil {
		return backend.Placement{}, fmt.Errorf("place sample %s: %w", project, err)
	}
	m.refresh(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	snap := m.snapshot(nil)
	refuse := func(why string) (backend.Placement, error) {
		b.projects[project] = nil
		return backend.Placement{}, &backend.PlacementError{Project: project, Refusals: []backend.Refusal{{Engine: m.name, Reason: why}}}
	}
	switch {
	case snap.Down:
		return refuse("down, and it holds the state of " + from + " the sample starts from: " + snap.Why)
	case snap.Max > 0 && snap.Live >= snap.Max:
		return refuse(fmt.Sprintf("full (%d of %d samples), and it holds the state of %s the sample starts from", snap.Live, snap.Max, from))
	}
	m.place(project)
	b.projects[project] = m
	return backend.Placement{Engine: m.name, Endpoint: m.b.Endpoint(), Reason: "holds the state of " + from}, nil
}

// snapshot is the engine as placement sees it, for a sample running refs.
func (m *member) snapshot(refs []string) placement.Engine {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := placement.Engine{Name: m.name, Live: len(m.live), Max: m.max, CPUs: m.cpus, Down: m.down}
	if m.downErr != nil {
		e.Why = m.downErr.Error()
	}
	for _, r := range refs {
		if !m.images[r] {
			e.Missing++
		}
	}
	return e
}

// unfit says why the engine's labels do not match want, "" when they do.
func (m *member) unfit(want map[string]string) string {
	var miss []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := m.labels[k]; !ok || v != want[k] {
			miss = append(miss, k+"="+want[k])
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return "labels do not match (the sample wants " + strings.Join(miss, ",") + ")"
}

// probeImages learns which of refs the engine has, for those it knows nothing of yet.
func (b *Backend) probeImages(ctx context.Context, m *member, refs []string) {
	for _, r := range refs {
		if _, known := m.knowsImage(r); known {
			continue
		}
		if _, err := m.image(ctx, r); err != nil && errdefs.Kind(err) != "not_found" {
			return
		}
	}
}

// projectImages are the images a project's services run, sorted, without duplicates.
func projectImages(p *types.Project) []string {
	var refs []string
	for _, s := range p.Services {
		if s.Image != "" && !slices.Contains(refs, s.Image) {
			refs = append(refs, s.Image)
		}
	}
	slices.Sort(refs)
	return refs
}
