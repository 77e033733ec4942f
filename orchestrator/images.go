package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	cbxerr "github.com/composebox/composebox/internal/errdefs"
)

// checkImageOwners refuses, unless the policy allows other-tasks-images, a service that runs an
// image composebox built for another task. A built image's tag is a hash of its task's build
// inputs, so anyone who has those files can name it; running it would give this task what
// another task built, secrets baked in included. Whose image it is rests on the task's
// identity (its name and its directory, taskIdentity), never on its name alone, which a file
// chooses (a Harbor task.toml's [task] name). composebox's own base image is everyone's. An
// image that is not there is left to the presence check.
func (t *Task) checkImageOwners(ctx context.Context, p *types.Project) error {
	if t.policy.AllowOtherTasksImages {
		return nil
	}
	type owner struct{ task, identity string }
	owners := map[string]owner{}
	var vs []compose.Violation
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if s.Build != nil || s.Image == "" {
			continue
		}
		o, seen := owners[s.Image]
		if !seen {
			img, err := t.o.backend.Image(ctx, s.Image)
			switch {
			case errors.Is(err, cbxerr.ErrNotFound):
			case err != nil:
				return err
			default:
				o.task, o.identity = builtFor(img.Labels)
			}
			owners[s.Image] = o
		}
		if o.task == "" || o.identity == t.identity {
			continue
		}
		why := fmt.Sprintf("an image composebox built for another task (%s)", o.task)
		if o.task == t.name {
			why = fmt.Sprintf("an image composebox built for another task named %s, from another directory: a name alone does not make it this task's", o.task)
		}
		vs = append(vs, compose.Violation{Service: name, Field: "image", Value: s.Image, Rule: "other-tasks-images",
			Why: why, OptIn: "--allow other-tasks-images"})
	}
	if len(vs) == 0 {
		return nil
	}
	return &compose.PolicyError{Op: "check the images of task " + t.name, Violations: vs}
}

// builtFor is the task an image was built for by composebox and that task's identity, "" for
// an image composebox did not build for a task. Its own base image carries an empty task
// label; a task's image built on the base inherits the base's other labels, so the task label
// alone says whether it is a task's.
func builtFor(lbl map[string]string) (task, identity string) {
	if lbl[labels.LabelManaged] != "true" {
		return "", ""
	}
	return lbl[labels.LabelTask], lbl[labels.LabelTaskIdentity]
}

// taskIdentity is what makes a task's built images its own: a hash of its name and its task
// directory with every symlink resolved. A file may name itself after another task; it cannot
// move into that task's directory.
func taskIdentity(name, dir string) string {
	if dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = compose.ResolvePath(abs)
		}
	}
	h := sha256.Sum256([]byte("composebox task identity v1\x00" + name + "\x00" + dir))
	return hex.EncodeToString(h[:16])
}
