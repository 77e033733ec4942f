package dockerbackend

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/orchestrator/backend"
)

// Logs streams one container's logs. A container with a TTY has one raw stream; the others
// are multiplexed. Closing the body is what ends a follow blocked in a read when ctx ends.
func (b *Backend) Logs(ctx context.Context, id string, opts backend.LogsOptions) error {
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	info, err := b.raw.ContainerInspect(ctx, id)
	if err != nil {
		return notFound(err, "container "+id)
	}
	rc, err := b.raw.ContainerLogs(ctx, id, logsOptions(opts))
	if err != nil {
		return notFound(err, "container "+id)
	}
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	defer rc.Close()
	if info.Config != nil && info.Config.Tty {
		_, err = io.Copy(stdout, rc)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, rc)
	}
	return err
}

func logsOptions(opts backend.LogsOptions) container.LogsOptions {
	lo := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: opts.Follow, Timestamps: opts.Timestamps, Tail: "all"}
	switch {
	case opts.Tail > 0:
		lo.Tail = strconv.Itoa(opts.Tail)
	case opts.Tail < 0:
		lo.Tail = "0"
	}
	if !opts.Since.IsZero() {
		lo.Since = strconv.FormatInt(opts.Since.Unix(), 10) + "." + fmt.Sprintf("%09d", opts.Since.Nanosecond())
	}
	return lo
}
