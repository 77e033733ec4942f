package testutil

import "github.com/docker/docker/api/types/image"

func imageRemoveOptions() image.RemoveOptions {
	return image.RemoveOptions{Force: true, PruneChildren: true}
}
