package sandboxio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// hostKill is the fallback for images without a shell. ExecInspect gives the exec's pid in
// the host's pid namespace; when that pid's environment here holds the tag, the engine runs
// on this host and this process can read its processes, so it scans /proc for the tag and
// kills the same set the in-container script would. Otherwise it reports why it cannot.
func hostKill(ctx context.Context, t Target, tag, execID string) error {
	ins, err := t.Client.ContainerExecInspect(ctx, execID)
	if err != nil {
		return fmt.Errorf("inspect exec: %w", err)
	}
	if ins.Pid == 0 {
		return errors.New("the exec has no pid")
	}
	needle := []byte(TagEnv + "=" + tag)
	env, err := os.ReadFile("/proc/" + strconv.Itoa(ins.Pid) + "/environ")
	if err != nil || !bytes.Contains(env, needle) {
		if !ins.Running {
			return nil // the main process is gone; nothing we can see is left to kill
		}
		return errors.New("the engine's processes are not visible from this host")
	}
	for range 20 {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		var pids []int
		for _, d := range dir {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + d.Name() + "/environ")
			if err == nil && bytes.Contains(b, needle) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGSTOP)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return errors.New("processes still running after 20 rounds of kills")
}
