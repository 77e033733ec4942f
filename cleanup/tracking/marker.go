package tracking

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
)

// Markers are volumes that record what engine labels cannot (labels never change after
// creation): a sample handed over, a pooled sample free to take, who took it. The project's
// compose file must never be able to create or pre-empt one, so a marker's name is outside
// every name compose gives a project's resources:
//
//   - compose names a volume <project>_<key>, and composebox prefixes any fixed name: with the
//     project name, so every volume a project creates starts with its own project name;
//   - a marker is named cbx.<kind>.<project>. Project names cannot hold a dot, so no project
//     name is a prefix of it, and a dot right after "cbx" starts no project's name either.
//
// A name alone is not trusted: a marker counts only when it also carries the labels composebox
// gave it (see isMarker), and creating one checks that the volume the engine returns is ours,
// since a create of an existing name silently returns the existing volume.

// markerName is the name of project's marker of kind.
func markerName(kind, project string) string { return labels.MarkerName(kind, project) }

// Marker kinds.
const (
	markerDetached = labels.MarkerDetached
	markerWarm     = labels.MarkerWarm
	markerClaim    = labels.MarkerClaim
)

// createMarker creates the marker volume name with lbl and checks that the volume the engine
// returns is that marker: same project, task, sample, owner and pool state. A volume of that name
// with other labels is a conflict, never taken for ours.
func createMarker(ctx context.Context, c client.APIClient, name string, lbl map[string]string) error {
	v, err := c.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: lbl})
	if err != nil {
		return err
	}
	for _, k := range []string{labels.ComposeProjectLabel, labels.LabelManaged, labels.LabelTask, labels.LabelSample, labels.LabelOwner, labels.LabelPool} {
		if v.Labels[k] != lbl[k] {
			return cbxerr.New(cbxerr.ErrConflict, fmt.Sprintf("volume %s exists and is not composebox's marker: label %s is %q, want %q", name, k, v.Labels[k], lbl[k]))
		}
	}
	return nil
}

// isMarker reports whether a volume is project's marker of kind: its name and its labels both
// say so. Any other resource carrying a marker's labels is not one.
func isMarker(name string, lbl map[string]string, kind string) bool {
	project := lbl[labels.ComposeProjectLabel]
	return project != "" && name == markerName(kind, project) && lbl[labels.LabelManaged] == "true"
}

// markerKind is the kind of marker a volume of that name and those labels is, "" for none.
func markerKind(name string, lbl map[string]string) string {
	rest, ok := strings.CutPrefix(name, "cbx.")
	if !ok {
		return ""
	}
	kind, _, _ := strings.Cut(rest, ".")
	if !isMarker(name, lbl, kind) {
		return ""
	}
	return kind
}
