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
)

const (
	// diagnoseTimeout bounds the inspect and log calls made to explain an ErrUnavailable.
	diagnoseTimeout = 5 * time.Second
	// logTailLines and logTailBytes keep diagnostics readable in one error message.
	logTailLines = 20
	logTailBytes = 4096
)

// Diagnosis is the state of a container, as reported by the engine, for explaining why it
// cannot run anything.
type Diagnosis struct {
	Container string // as given in the Target
	Name      string
	// Missing is set when the container no longer exists; nothing else is then known.
	Missing    bool
	Status     string // created, running, paused, restarting, removing, exited, dead
	Running    bool
	Paused     bool
	ExitCode   int
	OOMKilled  bool
	Error      string // the engine's error for the container, if any
	FinishedAt string
	// LogTail is the end of the container's logs (stdout and stderr interleaved).
	LogTail string
}

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

// String is a one-line explanation for error messages.
func (d Diagnosis) String() string {
	name := d.Name
	if name == "" {
		name = d.Container
	}
	if d.Missing {
		return fmt.Sprintf("container %s no longer exists", name)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "container %s is %s", name, d.Status)
	if !d.Running || d.Paused {
		fmt.Fprintf(&sb, " (exit code %d, oom killed %t", d.ExitCode, d.OOMKilled)
		if d.FinishedAt != "" && !strings.HasPrefix(d.FinishedAt, "0001-") {
			fmt.Fprintf(&sb, ", finished %s", d.FinishedAt)
		}
		if d.Error != "" {
			fmt.Fprintf(&sb, ", error %q", d.Error)
		}
		sb.WriteString(")")
	}
	if d.LogTail != "" {
		fmt.Fprintf(&sb, "; last log lines: %q", d.LogTail)
	} else {
		sb.WriteString("; no log output")
	}
	return sb.String()
}
