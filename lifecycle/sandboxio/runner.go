package sandboxio

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	dockererrdefs "github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
)

// TagEnv is the environment variable every exec carries, with a value unique to that exec.
// Children inherit it, even across setsid or a double fork, which is how a timeout finds the
// whole tree of processes to kill (see the package documentation).
const TagEnv = "COMPOSEBOX_EXEC"

const (
	// killTimeout bounds one kill exec.
	killTimeout = 10 * time.Second
	// streamGrace is how long the output stream may stay open after the first kill. The
	// engine itself closes it at most 2 s after the exec's main process exits, even if an
	// escaped child still holds it.
	streamGrace = 5 * time.Second
	// inspectTimeout bounds the final ExecInspect and its polling.
	inspectTimeout = 10 * time.Second
	// stdinChunk is the size of the writes to the exec's stdin.
	stdinChunk = 32 << 10
	// feedGrace is how long an exec that ended waits for its stdin source's read in progress
	// to return. A source that blocks longer is left to its goroutine, which ends when that
	// read returns: the call itself never waits on it.
	feedGrace = time.Second
)

// newTag returns a fresh exec tag. Its length is fixed, so no tag is a prefix of another and
// a substring match on /proc/<pid>/environ is exact.
func newTag() string { return rand.Text() }

// endReason is why the wait for an exec ended.
type endReason int

const (
	endExited   endReason = iota // the output stream ended: the command finished by itself
	endTimeout                   // the exec's own timeout passed
	endCanceled                  // the caller's context ended
	endKilled                    // Process.Kill
	endSink                      // an output sink stopped reading (a limit, or its writer failed)
	endStdin                     // the stdin source failed
	endStream                    // the output stream broke
)

// runSpec is one exec as the engine sees it.
type runSpec struct {
	cmd     []string
	env     []string // KEY=VALUE; the tag is added by start
	user    string
	workdir string
	// stdin is nil for a closed stdin. A read error from it kills the command, so that a
	// failed upload never looks like a complete one.
	stdin io.Reader
	// stdout and stderr receive the demultiplexed output, one Write per engine frame. A sink
	// returns errStop to stop the stream, which kills the command.
	stdout, stderr io.Writer
	timeout        time.Duration
	// stop, when closed, kills the command (Process.Kill).
	stop <-chan struct{}
	// abort is closed once before a kill, so that the caller's writers blocked on a slow
	// consumer give up (see guardedWriter). Made by start when nil.
	abort chan struct{}
	// tty runs the command on a terminal of size; resize passes size changes on.
	tty    bool
	size   WindowSize
	resize <-chan WindowSize
}

// outcome is what happened to one exec.
type outcome struct {
	exitCode int
	// started is false when the engine could not start the process at all (ExecInspect
	// reports pid 0): startMsg then holds the engine's message, and no output is the
	// command's.
	started   bool
	startMsg  string
	startFail startFailure
	end       endReason
	// endErr is the error behind endSink, endStdin or endStream.
	endErr error
	// killErr is set when the processes could not be killed after a timeout or cancel.
	killErr  error
	duration time.Duration
}

// execution is a started exec.
type execution struct {
	t        Target
	s        runSpec
	tag      string
	id       string
	hr       types.HijackedResponse
	out      *holdback
	begin    time.Time
	copyDone chan error
	stdinErr chan error // the stdin source's failure; never the connection's
	fed      chan struct{}
	haltOnce sync.Once
	// ended is closed when wait returns: the resize follower stops with it.
	ended chan struct{}
}

// halt closes abort, once.
func (e *execution) halt() { e.haltOnce.Do(func() { close(e.s.abort) }) }

// start creates and attaches the exec, which starts the command, then starts feeding stdin
// and reading output concurrently, so that neither side can block the other at any size.
func start(ctx context.Context, t Target, s runSpec, op string) (*execution, error) {
	if s.abort == nil {
		s.abort = make(chan struct{})
	}
	e := &execution{t: t, s: s, tag: newTag(), begin: time.Now(), copyDone: make(chan error, 1), stdinErr: make(chan error, 1), ended: make(chan struct{})}
	env := make([]string, 0, len(s.env)+1)
	env = append(env, s.env...)
	env = append(env, TagEnv+"="+e.tag)
	created, err := t.Client.ContainerExecCreate(ctx, t.Container, container.ExecOptions{
		User:         s.user,
		WorkingDir:   s.workdir,
		Env:          env,
		Cmd:          s.cmd,
		AttachStdin:  s.stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Tty:          s.tty,
	})
	if err != nil {
		return nil, t.engineError(ctx, op, err)
	}
	e.id = created.ID
	e.hr, err = t.Client.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: s.tty})
	if err != nil {
		return nil, t.engineError(ctx, op, err)
	}
	if s.tty {
		e.followResize(ctx)
	}
	e.out = &holdback{w: s.stdout}
	if s.tty {
		e.out.started = func() bool { return e.running(ctx) }
	}
	if s.stdin != nil {
		e.fed = make(chan struct{})
		go func() { defer close(e.fed); e.feed() }()
	}
	go func() {
		var err error
		if s.tty {
			// A terminal has one stream, not multiplexed.
			_, err = io.Copy(e.out, e.hr.Reader)
		} else {
			_, err = stdcopy.StdCopy(e.out, s.stderr, e.hr.Reader)
		}
		e.copyDone <- err
		if err != nil {
			// A sink stopped (a limit, a failed or abandoned writer): the rest of the output
			// is nobody's, but it must still be read until wait closes the connection, since
			// the engine queues a container's exec exits behind a process whose output is not
			// read (the kill exec's own exit included).
			_, _ = io.Copy(io.Discard, e.hr.Reader)
		}
	}()
	return e, nil
}

// running reports whether the engine says the process runs. The engine records the pid just
// after the process starts, so a moment's wait for it is allowed; an exec that could not start
// stops running instead.
func (e *execution) running(ctx context.Context) bool {
	for range 50 {
		ins, err := e.t.Client.ContainerExecInspect(ctx, e.id)
		if err != nil || !ins.Running {
			return false
		}
		if ins.Pid != 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return false
}

// followResize sets the terminal's first size, then passes each size sent on the resize hook
// on until the exec ends. The engine accepts a resize only once the process runs, so the
// first one is retried briefly.
func (e *execution) followResize(ctx context.Context) {
	resize := func(sz WindowSize) error {
		if sz.Rows == 0 || sz.Cols == 0 {
			return nil
		}
		return e.t.Client.ContainerExecResize(ctx, e.id, container.ResizeOptions{Height: sz.Rows, Width: sz.Cols})
	}
	go func() {
		for i := 0; i < 20 && resize(e.s.size) != nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-e.ended:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if e.s.resize == nil {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.ended:
				return
			case sz, ok := <-e.s.resize:
				if !ok {
					return
				}
				_ = resize(sz)
			}
		}
	}()
}

// feed copies stdin to the exec, then half-closes the connection so the command sees EOF.
// A write error means the command stopped reading (it exited or closed stdin): that is the
// command's business, not a failure. A read error from the source is reported, and the
// connection is left open so the command never sees a clean EOF.
func (e *execution) feed() {
	buf := make([]byte, stdinChunk)
	for {
		n, rerr := e.s.stdin.Read(buf)
		if n > 0 {
			if _, werr := e.hr.Conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if errors.Is(rerr, io.EOF) {
			_ = e.hr.CloseWrite()
			return
		}
		if rerr != nil {
			e.stdinErr <- rerr
			return
		}
	}
}

// wait runs the exec to its end: the command finishing, its timeout, the caller's context, a
// Kill, a sink that stops, or a failing stdin source. In every case but the first the whole
// process tree is killed inside the container before wait returns. It returns an error only
// when the engine fails or the container is unavailable.
func (e *execution) wait(ctx context.Context, op string) (outcome, error) {
	var o outcome
	defer func() {
		close(e.ended)
		e.hr.Close()
		if e.fed != nil {
			// The connection is closed, so the feeder's next write fails; a read of the
			// stdin source in progress may block forever, and must not hold the call.
			tm := time.NewTimer(feedGrace)
			select {
			case <-e.fed:
			case <-tm.C:
			}
			tm.Stop()
		}
	}()
	var deadline <-chan time.Time
	if e.s.timeout > 0 {
		tm := time.NewTimer(e.s.timeout)
		defer tm.Stop()
		deadline = tm.C
	}
	var copyErr error
	copied := false
	select {
	case copyErr = <-e.copyDone:
		copied = true
	case <-deadline:
		o.end = endTimeout
	case <-ctx.Done():
		o.end = endCanceled
	case <-e.s.stop:
		o.end = endKilled
	case o.endErr = <-e.stdinErr:
		o.end = endStdin
	}
	if !copied {
		// A stream that ended at the same moment wins: the command finished by itself.
		select {
		case copyErr = <-e.copyDone:
			copied = true
			o.end, o.endErr = endExited, nil
		default:
		}
	}
	if copied && copyErr != nil {
		if errors.Is(copyErr, errStop) {
			o.end = endSink
		} else {
			o.end = endStream
		}
		o.endErr = copyErr
	}

	if o.end != endExited {
		e.halt()
		if copied {
			// Nobody reads the stream any more. It must not stay open: Docker 20.10 handles
			// a container's exec exits one at a time, and the exit of a process whose output
			// is not being read blocks that queue, so the kill exec's own exit, and every
			// other exec's in the container, would hang behind it.
			e.hr.Close()
		}
		o.killErr = e.kill(ctx)
		if !copied {
			// The stream ends when the command is dead. Kill again until it does: the
			// engine answers the attach before it has started the process, so a kill right
			// after the start can run before there is anything to kill.
			giveUp := time.Now().Add(streamGrace)
			retry := 100 * time.Millisecond
			for ended := false; !ended; {
				tm := time.NewTimer(retry)
				select {
				case <-e.copyDone:
					ended = true
				case <-tm.C:
					if time.Now().After(giveUp) {
						// Something escaped the kill and holds the stream: stop reading it.
						e.hr.Close()
						<-e.copyDone
						ended = true
						break
					}
					o.killErr = e.kill(ctx)
					retry = min(2*retry, time.Second)
				}
				tm.Stop()
			}
		}
	}

	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), inspectTimeout)
	defer cancel()
	ins, err := e.inspect(ictx, o.end != endExited)
	o.duration = time.Since(e.begin)
	if err != nil {
		if dockererrdefs.IsNotFound(err) || errors.Is(err, errContainerStopped) {
			return o, e.t.unavailable(ictx, op, nil)
		}
		return o, e.t.engineError(ictx, op, err)
	}
	o.exitCode = ins.ExitCode
	if ins.Running {
		// Only after a kill that did not work (or a stream we had to abandon).
		o.exitCode = -1
		if o.killErr == nil && o.end != endExited {
			o.killErr = errors.New("the command is still running after the kill")
		}
	}
	o.started = ins.Pid != 0
	if o.started {
		if err := e.out.release(); err != nil && o.end == endExited {
			o.end, o.endErr = endSink, err
		}
	} else {
		o.startMsg = strings.TrimRight(string(e.out.take()), "\r\n")
		o.startFail = classifyStart(o.startMsg)
	}
	// A command killed by a signal, a broken stream, a kill that failed, or a start failure
	// the engine did not explain may all mean the container went away underneath: check, so
	// that this is never mistaken for the command's own result (or for a timeout). A normal
	// exit costs nothing extra.
	suspect := o.end == endStream || o.killErr != nil ||
		(o.end == endExited && (o.exitCode >= 128 || o.exitCode < 0)) ||
		(!o.started && o.startFail == startOther)
	if suspect {
		// A container killed underneath ends its execs before the engine marks it stopped
		// (tens of milliseconds when idle, over a second on a loaded host), and SIGKILL (137)
		// is what they die of: watch its state for a while then. A 137 that follows our own
		// kill (a timeout, a cancel, Kill) is explained, and like any other case is settled
		// with one look, so timeouts do not pay for the watch.
		watch := time.Duration(0)
		if o.end == endStream || o.exitCode < 0 || (o.exitCode == 137 && o.end == endExited) {
			watch = containerStopWatch
		}
		if stoppedWithin(ictx, e.t, watch) {
			return o, e.t.unavailable(ictx, op, o.endErr)
		}
	}
	return o, nil
}

// containerStopWatch is how long an exec that died of a SIGKILL nobody in composebox sent
// waits to learn whether its container died. The watch ends as soon as the engine reports the
// container stopped, so only a command killed inside a container that stays up pays for all
// of it.
const containerStopWatch = 3 * time.Second

// stoppedWithin reports whether the target's container is (or, within d, becomes) gone or
// stopped, or the engine itself is (a daemon that stopped takes its containers with it). Any
// other engine error counts as running: the command's own result stands.
func stoppedWithin(ctx context.Context, t Target, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		running, err := containerRunning(ctx, t)
		if (err == nil && !running) || client.IsErrConnectionFailed(err) {
			return true
		}
		if err != nil || time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// startFailure is why the engine could not start an exec's process.
type startFailure int

const (
	startOK         startFailure = iota
	startNotFound                // argv[0] does not exist (exit 127 by the contract)
	startPermission              // argv[0] is not executable (exit 126)
	startCwd                     // the working directory does not exist
	startUser                    // the user or group is unknown
	startOther
)

// classifyStart reads the engine's start error. Matching text is the only way: the engine
// reports a failed exec start only as this message in the stream (with exit code 126 and pid
// 0 for every cause). The patterns cover runc (Docker's default) and crun.
func classifyStart(msg string) startFailure {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "unable to find user"), strings.Contains(m, "unable to find group"),
		strings.Contains(m, "no matching entries in passwd"), strings.Contains(m, "no matching entries in group"):
		return startUser
	case strings.Contains(m, "chdir to cwd"), strings.Contains(m, "chdir"):
		return startCwd
	case strings.Contains(m, "executable file not found"), strings.Contains(m, "executable file `") && strings.Contains(m, "not found"),
		strings.Contains(m, "exec: ") && strings.Contains(m, "no such file or directory"):
		return startNotFound
	case strings.Contains(m, "permission denied"):
		return startPermission
	default:
		return startOther
	}
}

// kill kills the exec's process tree, on a context of its own so that a cancelled caller
// still gets its processes killed.
func (e *execution) kill(ctx context.Context) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	return killTree(kctx, e.t, e.s.user, e.tag, e.id)
}

var errContainerStopped = errors.New("container stopped while the exec was running")

// inspect returns the exec's final state. The engine marks an exec finished before it closes
// the output stream, so one call is the rule; it polls only in the rare case of a stream that
// ended (or was closed by us) before the exit was recorded, and gives up when the container
// itself has stopped, since the exec's exit is then never recorded.
func (e *execution) inspect(ctx context.Context, killed bool) (container.ExecInspect, error) {
	// After a kill the exit should be recorded at once; if it is not, the kill failed, and
	// waiting longer only delays reporting that.
	budget := 2 * time.Second
	if killed {
		budget = 300 * time.Millisecond
	}
	giveUp := time.Now().Add(budget)
	delay := time.Millisecond
	for i := 0; ; i++ {
		ins, err := e.t.Client.ContainerExecInspect(ctx, e.id)
		if err != nil || !ins.Running || time.Now().After(giveUp) {
			return ins, err
		}
		if i == 3 {
			if running, err := containerRunning(ctx, e.t); err == nil && !running {
				return ins, errContainerStopped
			}
		}
		select {
		case <-ctx.Done():
			return ins, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// containerRunning reports whether the target's container exists and runs.
func containerRunning(ctx context.Context, t Target) (bool, error) {
	info, err := t.Client.ContainerInspect(ctx, t.Container)
	if dockererrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return info.State != nil && info.State.Running && !info.State.Paused, nil
}
