package orchestrator

import (
	"context"
	"errors"
	"fmt"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
)

// checkImageOwners refuses, unless the policy allows other-tasks-images, a service that runs an
// image composebox built for another task. A built image's tag is a hash of its task's build
// inputs, so anyone who has those files can name it; running it would give this task what
// another task built, secrets baked in included. composebox's own base image is everyone's. An
// image that is not there is left to the presence check.
func (t *Task) checkImageOwners(ctx context.Context, p *types.Project) error {
	if t.policy.AllowOtherTasksImages {
		return nil
	}
	owners := map[string]string{}
	var vs []compose.Violation
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.Build != nil || s.Image == "" {
			continue
		}
		owner, seen := owners[s.Image]
		if !seen {
			img, err := t.o.backend.Image(ctx, s.Image)
			switch {
			case errors.Is(err, cbxerr.ErrNotFound):
			case err != nil:
				return err
			default:
				owner = builtFor(img.Labels)
			}
			owners[s.Image] = owner
		}
		if owner != "" && owner != t.name {
			vs = append(vs, compose.Violation{Service: name, Field: "image", Value: s.Image, Rule: "other-tasks-images",
				Why: fmt.Sprintf("an image composebox built for another task (%s)", owner), OptIn: "--allow other-tasks-images"})
		}
	}
	if len(vs) == 0 {
		return nil
	}
	return &compose.PolicyError{Op: "check the images of task " + t.name, Violations: vs}
}

// builtFor is the task an image was built for by composebox, "" for an image composebox did
// not build for a task. Its own base image carries an empty task label; a task's image built
// on the base inherits the base's other labels, so the task label alone says whose it is.
func builtFor(lbl map[string]string) string {
	if lbl[labels.LabelManaged] != "true" {
		return ""
	}
	return lbl[labels.LabelTask]
}
