package sandboxio

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// killScript kills, inside the container, every process whose environment holds the
// exec's tag ($1), plus any descendant of one (which catches a child started with a cleared
// environment, e.g. `env -i`, as long as its parent is still there). Each round stops the
// whole set before killing it, so a process cannot fork faster than it is killed, and rounds
// repeat until a scan finds nothing. It needs only sh, grep and kill: busybox and every
// Debian-like image have them. Exit 0: nothing tagged is left; exit 3: no grep (an image cut
// down to a shell and its program), where a scan would find nothing and kill nothing.
//
// grep runs without -F on purpose: busybox's fixed-string search stops at the first NUL of
// the environ file. The tag's alphabet (base32) holds no regular expression metacharacter.
const killScript = `command -v grep >/dev/null 2>&1 || exit 3
t="` + TagEnv + `=$1"
me=$$
n=0
while [ $n -lt 20 ]; do
	n=$((n+1))
	pids=
	for e in /proc/[0-9]*/environ; do
		p=${e#/proc/}; p=${p%/environ}
		[ "$p" = "$me" ] && continue
		grep -qs -e "$t" "$e" 2>/dev/null && pids="$pids $p"
	done
	more=1
	while [ -n "$pids" ] && [ $more = 1 ]; do
		more=0
		for s in /proc/[0-9]*/stat; do
			p=${s#/proc/}; p=${p%/stat}
			case " $pids " in *" $p "*) continue ;; esac
			read -r line 2>/dev/null <"$s" || continue
			set -- ${line##*) }
			case " $pids " in *" $2 "*) pids="$pids $p"; more=1 ;; esac
		done
	done
	[ -z "$pids" ] && exit 0
	kill -STOP $pids 2>/dev/null
	kill -KILL $pids 2>/dev/null
done
exit 1
`

// killNoGrep is killScript's exit code in a container without grep.
const killNoGrep = 3

// killTree kills every process of the exec tagged tag. The primary mechanism is a second
// exec running killScript as the same user as the command: root would not do, because
// reading another user's /proc/<pid>/environ takes CAP_SYS_PTRACE, which containers lack by
// default, while a user may always read (and signal) its own processes. When the image has
// no shell, it falls back to killing from the host through /proc, which works when the
// engine runs on this host and this process may signal its processes (see hostKill). So does
// an image with a shell but no grep.
func killTree(ctx context.Context, t Target, user, tag, execID string) error {
	code, started, out, err := quickExec(ctx, t, user, []string{"/bin/sh", "-c", killScript, "sh", tag})
	if err != nil {
		return fmt.Errorf("kill exec: %w", err)
	}
	if started && code == killNoGrep {
		started, out = false, "no grep"
	}
	if started {
		if code == 0 {
			return nil
		}
		return fmt.Errorf("kill exec: exit code %d: %s", code, strings.TrimSpace(out))
	}
	if herr := hostKill(ctx, t, tag, execID); herr != nil {
		return fmt.Errorf("kill: no shell in the container (%s) and no host fallback: %w", strings.TrimSpace(out), herr)
	}
	return nil
}

// quickExec runs a small internal command to completion and returns its exit code, whether
// it started, and its combined output (bounded).
func quickExec(ctx context.Context, t Target, user string, cmd []string) (int, bool, string, error) {
	created, err := t.Client.ContainerExecCreate(ctx, t.Container, container.ExecOptions{
		User: user, Cmd: cmd, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return 0, false, "", err
	}
	hr, err := t.Client.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, false, "", err
	}
	out := newTailBuffer(4096, false)
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(out, out, hr.Reader)
		done <- err
	}()
	select {
	case <-done:
	case <-ctx.Done():
		hr.Close()
		<-done
		return 0, false, "", ctx.Err()
	}
	hr.Close()
	ins, err := t.Client.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return 0, false, "", err
	}
	if ins.Running {
		return 0, true, "", errors.New("still running after its output ended")
	}
	return ins.ExitCode, ins.Pid != 0, string(out.Bytes()), nil
}
