package orchestrator_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// The agent makes a FIFO, and points a symlink at /dev/zero: reading either fails at once, by
// type, instead of blocking on the FIFO or streaming zeros until the limit.
func TestAttackReadFileOfFIFOOrDeviceFailsAtOnce(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := uniqueTask("fifo")
	removeTaskProjects(t, dockerClient(t, o), name)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive)})
	sb := startSamples(t, task, 1)[0].Default()
	r, err := sb.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "mkfifo /tmp/fifo && ln -s /dev/zero /tmp/zero"}})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("plant: %v %+v", err, r)
	}
	for path, kind := range map[string]string{"/tmp/fifo": "FIFO", "/dev/zero": "character device", "/tmp/zero": "character device"} {
		// Were the FIFO opened, the read would block until this deadline.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		start := time.Now()
		_, err := sb.ReadFile(ctx, path)
		n, errTo := sb.ReadFileTo(ctx, path, io.Discard, -1)
		cancel()
		for _, err := range []error{err, errTo} {
			if !errors.Is(err, orchestrator.ErrNotRegularFile) || !errors.Is(err, orchestrator.ErrInvalidConfig) ||
				orchestrator.ErrorKind(err) != "invalid_config" || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), kind) {
				t.Errorf("read %s: %v, want ErrNotRegularFile (invalid_config) naming the path and %q", path, err, kind)
			}
		}
		if n != 0 {
			t.Errorf("read %s: %d bytes streamed", path, n)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("read %s took %s", path, d)
		}
	}
	// A regular file still reads.
	if err := sb.WriteFile(t.Context(), "/tmp/plain", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if b, err := sb.ReadFile(t.Context(), "/tmp/plain"); err != nil || string(b) != "ok" {
		t.Fatalf("read a regular file: %q %v", b, err)
	}
}
