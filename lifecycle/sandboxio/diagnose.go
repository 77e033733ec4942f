package sandboxio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	dockererrdefs "github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/composebox/composebox/orchestrator/backend"
)

const (
	// diagnoseTimeout bounds the inspect and log calls made to explain an ErrUnavailable.
	diagnoseTimeout = 5 * time.Second
	// logTailLines and logTailBytes keep diagnostics readable in one error message.
	logTailLines = 20
	logTailBytes = 4096
)

// Diagnosis is the state of a container (the backend boundary's type).
type Diagnosis = backend.Diagnosis

// Diagnose inspects the target's container and reads the tail of its logs. A container that
// does not exist is a Diagnosis with Missing set, not an error.
func Diagnose(ctx context.Context, t Target) (Diagnosis, error) {
	d := Diagnosis{Container: t.Container}
	info, err := t.Client.ContainerInspect(ctx, t.Container)
	if dockererrdefs.IsNotFound(err) {
		d.Missing = true
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("inspect container %s: %w", t.Container, err)
	}
	d.Name = strings.TrimPrefix(info.Name, "/")
	if s := info.State; s != nil {
		d.Status = string(s.Status)
		d.Running, d.Paused = s.Running, s.Paused
		d.ExitCode, d.OOMKilled, d.Error, d.FinishedAt = s.ExitCode, s.OOMKilled, s.Error, s.FinishedAt
	}
	logs, err := t.Client.ContainerLogs(ctx, t.Container, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(logTailLines),
	})
	if err != nil {
		// The state is what matters; a log driver without read support must not hide it.
		d.LogTail = "(logs unavailable: " + err.Error() + ")"
		return d, nil
	}
	defer logs.Close()
	var buf bytes.Buffer
	w := &limitWriter{w: &buf, limit: 64 << 10}
	if info.Config != nil && info.Config.Tty {
		_, _ = io.Copy(w, logs)
	} else {
		_, _ = stdcopy.StdCopy(w, w, logs)
	}
	tail := buf.Bytes()
	if len(tail) > logTailBytes {
		tail = tail[len(tail)-logTailBytes:]
	}
	d.LogTail = strings.TrimRight(decodeText(tail), "\n")
	return d, nil
}
