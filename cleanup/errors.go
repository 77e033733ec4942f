package cleanup

import (
	"github.com/docker/docker/errdefs"
)

// isRemovalInProgress: two removers racing on one container (a sample's own cleanup and a
// task-wide sweep, say) get a conflict from the engine; the container is going away either way.
func isRemovalInProgress(err error) bool {
	return errdefs.IsConflict(err)
}
