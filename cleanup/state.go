package cleanup

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-multierror"
)

// StateRepo is the repository of the images a project's recorded states (snapshots) and the
// project's own start from a state are tagged in. An image committed once is shared by every
// project that starts from it, each through a tag of its own repository: removing a project
// removes its tags, and the image goes with its last tag.
func StateRepo(project string) string { return stateRepoPrefix + project }

const stateRepoPrefix = "composebox-state/"

// StateProject is the project whose state repository tag (repository:tag) is in.
func StateProject(tag string) (string, bool) {
	rest, ok := strings.CutPrefix(tag, stateRepoPrefix)
	if !ok {
		return "", false
	}
	project, _, ok := strings.Cut(rest, ":")
	if !ok || project == "" {
		return "", false
	}
	return project, true
}

// removeStateTags removes the tags in project's state repository. The removal is not forced:
// an image another project still tags or runs stays.
func removeStateTags(ctx context.Context, c client.APIClient, project string) (int, error) {
	repo := StateRepo(project)
	imgs, err := c.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil {
		return 0, fmt.Errorf("remove project %s: list snapshot images: %w", project, err)
	}
	var (
		errs *multierror.Error
		n    int
	)
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			if !strings.HasPrefix(tag, repo+":") {
				continue
			}
			if _, err := c.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true}); err != nil && !client.IsErrNotFound(err) {
				errs = multierror.Append(errs, fmt.Errorf("remove image %s of %s: %w", tag, project, err))
				continue
			}
			n++
		}
	}
	return n, errs.ErrorOrNil()
}
