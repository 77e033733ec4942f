// Package sandboxio runs commands and reads and writes files in one running container,
// straight on the Engine API (exec create, attach and inspect). It never uses a CLI or the
// compose library. orchestrator.Sandbox wraps it; the behaviour it implements (argv without an
// implicit shell, output limits, timeouts that kill inside the container, file access with the
// sandbox user's permissions) is checked against a real engine by the suite in
// internal/conformance.
//
// Everything here is a function of a Target (client, container, service name, working
// directory, default user) and is safe for concurrent use.
//
// # Exec
//
// Exec costs the engine's three calls and nothing more: ExecCreate, ExecAttach (which starts
// the process), reading the multiplexed stream to its end, and ExecInspect for the exit code.
// Stdin is written from its own goroutine while the output is read, so neither side can block
// the other at any size. Each stream is kept in a ring buffer holding its last OutputLimit
// bytes (10 MiB by default) while every byte is counted.
//
// When the engine cannot start the process at all, ExecInspect reports pid 0 and exit code
// 126 for every cause, and the only account of the cause is a message the engine writes into
// the stdout stream. That message is held back (see holdback), moved to Stderr, and read:
// a missing argv[0] becomes exit code 127, a non-executable one ErrPermission (126), a
// missing working directory ErrNotFound, and an unknown user stays a 126 result whose
// output names the user.
//
// A container that is gone, stopped or paused makes ExecCreate fail with not-found or
// conflict: that is ErrUnavailable, with Diagnose's state, exit code, OOM flag and log tail in
// the message. A container killed while a command runs ends the command with SIGKILL a few
// tens of milliseconds before the engine marks the container stopped, so a 137 exit (only)
// watches the container's state for up to 250 ms before it is believed.
//
// # Timeouts and kills
//
// "Timed out" means the caller's deadline passed before the output ended, decided by our own
// timer, never by an exit code: busybox timeout exits 143, and a command that kills itself
// with SIGTERM within the deadline is an ordinary 143 result.
//
// Every exec carries TagEnv=<random 26-character tag> in its environment. Children inherit
// it, including through setsid and double forks, which a process group kill would miss. On a
// timeout, cancellation, Kill, strict output limit or read limit, a second exec runs a small
// sh script (killScript) as the same user as the command. It collects every process whose
// /proc/<pid>/environ holds the tag, adds their descendants by parent pid (a child started
// with a cleared environment, such as `env -i`, is caught while its parent lives), stops them
// all with SIGSTOP, kills them with SIGKILL, and repeats until a scan finds nothing. The kill
// is then repeated until the output stream ends, because the engine answers the attach before
// the process exists, so a kill right after the start may find nothing yet.
//
// The script runs as the command's user, not as root: a default container has no
// CAP_SYS_PTRACE, without which root cannot read another user's /proc/<pid>/environ, while a
// user can always read and signal its own processes. It needs sh, grep and kill (busybox,
// Debian and Alpine all have them). When the image has no /bin/sh, the fallback (hostKill)
// reads ExecInspect's host pid: if that pid's environment, seen from this host, holds the
// tag, the engine is local and the same scan and kill run on the host's /proc. What this
// cannot reach, and is documented as such: a process that both cleared its environment and
// lost its parent before the kill, and a process that changed to another user (setuid,
// su) when the command's user cannot signal it.
//
// Alternatives measured and rejected: wrapping argv in `setsid`/`timeout -k` changes argv[0]'s
// 126/127 semantics, needs those binaries, and misses children that call setsid; killing
// ExecInspect's host pid works only next to the engine and kills only one process. The tag
// costs nothing on the hot path: it is one more environment variable.
//
// One engine behaviour shapes the kill path: Docker 20.10 handles a container's exec exits
// one at a time, and the exit of a process whose output nobody reads blocks that queue (the
// kill exec's own exit, and every other exec's in the container, then wait behind it). So a
// stream that will not be read any more is closed before the kill, and every other kill path
// keeps draining the stream while it kills.
//
// # Files
//
// ReadFile and WriteFile run one exec of a small sh script as the target's user: `cat` of the
// file for a read, `mkdir -p` of the parent and `cat >file` with the data streamed on stdin
// for a write. The kernel thus applies that user's permissions (ErrPermission for a non-root
// user who may not read, write, or create), new files and directories belong to that user,
// symlinks are followed, and an overwrite truncates the existing file in place (keeping its
// mode and inode, as os.WriteFile does). Before cat, the scripts test the path with test(1)
// builtins and exit with dedicated codes for not found, not a directory, is a directory and
// permission denied, because error messages differ between shells and images.
//
// Measured on this project's machine (Docker 20.10.24, 2 cores; medians):
//
//	                      exec sh+cat  archive API (CopyTo/FromContainer)
//	write 100 B              41.5 ms   35.1 ms, + a mkdir/permission/chown exec (~35 ms)
//	write 1 MiB              55.7 ms   54.3 ms, + the same exec
//	write 50 MiB              185 ms    169 ms, + the same exec
//	read 100 B               38.8 ms   33.0 ms
//	read 1 MiB               62.8 ms   55.1 ms
//	read 50 MiB               187 ms    122 ms
//
// The archive API writes as root (so every write needs a second exec for the parent
// directory, the permission check and the ownership) and reads as root, bypassing the user's
// permissions; it also does not see tmpfs mounts or /proc, replaces a symlink instead of
// writing through it, and resets an overwritten file's mode. For writes the exec is the
// fastest correct path; for reads it costs ~6 ms on small files for semantics that are
// exactly the user's. `head -c` to cap reads in the container was measured too (300 ms for
// 50 MiB against cat's 187 ms), so the read limit is enforced here while streaming: past
// the limit the stream is closed and cat is killed.
//
// The scripts need /bin/sh, cat and mkdir; without a shell, file operations fail with
// ErrPrerequisite rather than silently dropping the user's permission semantics.
package sandboxio
