package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/compose/containerspec"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// Single-container specs against the real engine, one test per behaviour that the harnesses
// running one container rely on. Each spec
// gets a task name of its own, so that "nothing left" can be counted by the task label.

// spawn starts a session whose removal is registered before anything is asserted.
func spawnSession(t *testing.T, o *orchestrator.Orchestrator, spec orchestrator.ContainerSpec, opts orchestrator.SpawnOptions) *orchestrator.Session {
	t.Helper()
	s, err := o.Spawn(t.Context(), spec, opts)
	if s != nil {
		t.Cleanup(func() {
			if err := s.Cleanup(context.Background()); err != nil {
				t.Errorf("session cleanup: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	return s
}

// taskName is a task name unique to the test, for counting its resources by label.
func containerTask(*testing.T) string {
	return containerspec.TaskName(containerspec.Spec{Name: "c-" + compose.NewSampleID()})
}

// leftOf counts the containers, networks and volumes of a task.
func taskLeftovers(t *testing.T, o *orchestrator.Orchestrator, task string) int {
	t.Helper()
	return testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"="+task)
}

func shReq(script string) orchestrator.ExecRequest {
	return orchestrator.ExecRequest{Cmd: []string{"sh", "-c", script}, Timeout: 30 * time.Second}
}

// run execs a script and fails the test unless it exits 0; it returns stdout.
func mustExec(t *testing.T, s *orchestrator.Session, script string) string {
	t.Helper()
	res, err := s.Exec(t.Context(), shReq(script))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v, exit %d, stdout %q, stderr %q", script, err, res.ExitCode, res.StdoutText(), res.StderrText())
	}
	return res.StdoutText()
}

// Memory_limit_mb is a hard cap visible in the container's cgroup; cpus and the pids
// limit land too. The spec is a one-service compose project carrying the compose labels.
func TestContainerSeed001LimitsVisibleInCgroup(t *testing.T) {
	o, _ := newOrchestrator(t)
	spec := orchestrator.ContainerSpec{Name: containerTask(t), MemoryMB: 64, CPUs: 0.5, Pids: 77}
	s := spawnSession(t, o, spec, orchestrator.SpawnOptions{})
	// cgroup v2 has memory.max at the root of the container's cgroup; v1 (this machine) has
	// memory/memory.limit_in_bytes.
	got := strings.TrimSpace(mustExec(t, s, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"))
	if got != "67108864" {
		t.Errorf("memory limit in the cgroup is %q, want 67108864 (64 MiB)", got)
	}
	got = strings.TrimSpace(mustExec(t, s, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"))
	if got != "77" {
		t.Errorf("pids limit in the cgroup is %q, want 77", got)
	}
	info, err := dockerClient(t, o).ContainerInspect(t.Context(), s.Sandbox().ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	if info.HostConfig.NanoCPUs != 5e8 {
		t.Errorf("NanoCPUs %d, want 5e8", info.HostConfig.NanoCPUs)
	}
	if l := info.Config.Labels; l[labels.ComposeServiceLabel] != "default" || l[labels.LabelManaged] != "true" || l[labels.LabelTask] != spec.Name {
		t.Errorf("labels %v", l)
	}
	if info.HostConfig.Init == nil || !*info.HostConfig.Init {
		t.Error("the keep-alive container runs without init")
	}
	if s.Sandbox().WorkingDir() != "/workspace" {
		t.Errorf("workdir %q, want /workspace", s.Sandbox().WorkingDir())
	}
}

// Networking is disabled by default (--network none): only lo. Bridge mode gets an
// interface on a bridge network of the task's own (not the engine's shared default bridge,
// which the host firewall cannot cover), and publishes ports on loopback.
func TestContainerSeed001NetworkNoneHasOnlyLoopback(t *testing.T) {
	o, _ := newOrchestrator(t)
	none := spawnSession(t, o, orchestrator.ContainerSpec{Name: containerTask(t)}, orchestrator.SpawnOptions{})
	if got := strings.Fields(mustExec(t, none, "ls /sys/class/net")); len(got) != 1 || got[0] != "lo" {
		t.Errorf("network none: interfaces %v, want only lo", got)
	}

	name := containerTask(t)
	bridge := spawnSession(t, o, orchestrator.ContainerSpec{Name: name, Network: orchestrator.NetworkBridge,
		Ports: []orchestrator.PublishedPort{{HostIP: "127.0.0.1", ContainerPort: 8080}}}, orchestrator.SpawnOptions{})
	if got := mustExec(t, bridge, "ls /sys/class/net"); !strings.Contains(got, "eth0") {
		t.Errorf("network bridge: interfaces %q, want eth0", got)
	}
	info, err := dockerClient(t, o).ContainerInspect(t.Context(), bridge.Sandbox().ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	if mode := string(info.HostConfig.NetworkMode); mode == "bridge" || mode == "default" || !strings.HasSuffix(mode, "_default") {
		t.Errorf("network mode %q: want the sample's own default network, not the engine's bridge", mode)
	}
	pb := info.HostConfig.PortBindings["8080/tcp"]
	if len(pb) != 1 || pb[0].HostIP != "127.0.0.1" {
		t.Errorf("port bindings %v: want 8080/tcp on 127.0.0.1", info.HostConfig.PortBindings)
	}
	if n := testutil.Resources(t, dockerClient(t, o), labels.LabelTask+"="+name); n != 2 {
		t.Errorf("bridge mode: %d resources of the task, want its container and its network", n)
	}
}

// Static assets are mounted read-only under /static/<save_path>.
func TestContainerSeed000StaticAssetIsReadOnly(t *testing.T) {
	o, _ := newOrchestrator(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("asset"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := spawnSession(t, o, orchestrator.ContainerSpec{Name: containerTask(t), Assets: []orchestrator.Asset{
		{Source: dir, SavePath: "fixtures"},
		{Source: filepath.Join(dir, "data.txt"), SavePath: "single/data.txt"},
	}}, orchestrator.SpawnOptions{})
	if got := mustExec(t, s, "cat /static/fixtures/data.txt /static/single/data.txt"); got != "assetasset" {
		t.Errorf("assets read %q", got)
	}
	for _, script := range []string{"echo x > /static/fixtures/new.txt", "echo x >> /static/single/data.txt", "rm /static/fixtures/data.txt"} {
		res, err := s.Exec(t.Context(), shReq(script))
		if err != nil || res.ExitCode == 0 || !strings.Contains(res.StderrText(), "Read-only file system") {
			t.Errorf("%s: %v, exit %d, stderr %q: want a read-only file system error", script, err, res.ExitCode, res.StderrText())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data.txt")); string(b) != "asset" {
		t.Errorf("host asset changed: %q", b)
	}
}

// Per-spawn mounts override spec mounts at the same container path; relative host
// paths resolve against the workspace.
func TestContainerSeed000SpawnMountOverridesSpecMount(t *testing.T) {
	o, _ := newOrchestrator(t)
	ws := t.TempDir()
	for _, d := range []string{"config-spec", "config-spawn", "other"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, d, "which"), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := orchestrator.ContainerSpec{Name: containerTask(t), Workspace: ws, Mounts: []orchestrator.Mount{
		{Source: "config-spec", Target: "/data/config"},
		{Source: filepath.Join(ws, "other"), Target: "/data/other", ReadOnly: true},
	}}
	spawnMount, err := orchestrator.ParseMount("config-spawn:/data/config:ro")
	if err != nil {
		t.Fatal(err)
	}
	s := spawnSession(t, o, spec, orchestrator.SpawnOptions{Mounts: []orchestrator.Mount{spawnMount}})
	if got := mustExec(t, s, "cat /data/config/which; echo; cat /data/other/which"); got != "config-spawn\nother" {
		t.Errorf("mounts read %q, want the spawn's config and the spec's other", got)
	}
	// The workspace is mounted at the workdir (lowest priority, not overridden here).
	if got := mustExec(t, s, "cat other/which"); got != "other" {
		t.Errorf("workspace at the workdir: %q", got)
	}
}

// A mount at or under the workdir is rejected with a clear error, before anything
// starts; so is a per-spawn one.
func TestContainerSeed000MountUnderWorkdirRejected(t *testing.T) {
	o, _ := newOrchestrator(t)
	dir := t.TempDir()
	name := containerTask(t)
	cases := []struct {
		name  string
		spec  []orchestrator.Mount
		spawn []orchestrator.Mount
	}{
		{"spec mount under the workdir", []orchestrator.Mount{{Source: dir, Target: "/workspace/config"}}, nil},
		{"spec mount at the workdir", []orchestrator.Mount{{Source: dir, Target: "/workspace/"}}, nil},
		{"spawn mount under the workdir", nil, []orchestrator.Mount{{Source: dir, Target: "/workspace/a/b"}}},
	}
	for _, c := range cases {
		s, err := o.Spawn(t.Context(), orchestrator.ContainerSpec{Name: name, Workspace: dir, Mounts: c.spec}, orchestrator.SpawnOptions{Mounts: c.spawn})
		if s != nil {
			_ = s.Cleanup(context.Background())
		}
		if !errors.Is(err, orchestrator.ErrInvalidConfig) || !strings.Contains(err.Error(), "at or under the workdir /workspace") {
			t.Errorf("%s: err %v, want ErrInvalidConfig naming the workdir", c.name, err)
		}
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources created for rejected specs", n)
	}
}

// Every blocked docker flag is rejected before anything starts, with the blocklist's
// wording, as a policy violation.
func TestContainerSeed001BlockedFlagsRejected(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := containerTask(t)
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"--privileged"}, "--privileged"},
		{[]string{"--pid=host"}, "--pid=host"},
		{[]string{"--pid", "host"}, "--pid host"},
		{[]string{"--network=host"}, "--network=host"},
		{[]string{"--net", "host"}, "--net host"},
		{[]string{"--ipc=host"}, "--ipc=host"},
		{[]string{"--uts=host"}, "--uts=host"},
		{[]string{"--cap-add=ALL"}, "--cap-add=ALL"},
		{[]string{"--cap-add", "all"}, "--cap-add all"},
		{[]string{"-v", "/:/host"}, "-v"},
		{[]string{"-v/:/host"}, "-v/:/host"},
		{[]string{"--volume", "/:/host"}, "--volume"},
		{[]string{"--volume=/:/host"}, "--volume=/:/host"},
		{[]string{"--mount", "type=bind,src=/,dst=/host"}, "--mount"},
		{[]string{"--mount=type=bind,src=/,dst=/host"}, "--mount=type=bind,src=/,dst=/host"},
		{[]string{"--read-only", "--privileged"}, "--privileged"},
	}
	for _, c := range cases {
		s, err := o.Spawn(t.Context(), orchestrator.ContainerSpec{Name: name, ExtraArgs: c.args}, orchestrator.SpawnOptions{})
		if s != nil {
			_ = s.Cleanup(context.Background())
		}
		want := "'" + c.flag + "' is blocked by sandbox policy"
		if !errors.Is(err, orchestrator.ErrPolicyViolation) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want ErrPolicyViolation with %q", c.args, err, want)
		}
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources created for blocked flags", n)
	}
}

// A session is one keep-alive container that many execs share; setup runs
// at spawn, before the first command, and its output is kept apart from the command's.
// DisableSetup skips it (resuming from a snapshot).
func TestContainerSeed000SetupOutputApartAndDisableSetup(t *testing.T) {
	o, _ := newOrchestrator(t)
	spec := orchestrator.ContainerSpec{Name: containerTask(t), Setup: []string{
		"echo setup-out; echo setup-err >&2",
		"touch /tmp/setup-ran; echo second",
	}}
	s := spawnSession(t, o, spec, orchestrator.SpawnOptions{})
	if got, want := string(s.SetupStdout()), "setup-out\nsecond\n"; got != want {
		t.Errorf("SetupStdout %q, want %q", got, want)
	}
	if got := string(s.SetupStderr()); got != "setup-err\n" {
		t.Errorf("SetupStderr %q", got)
	}
	res, err := s.Exec(t.Context(), shReq("echo cmd; test -e /tmp/setup-ran"))
	if err != nil || res.ExitCode != 0 || res.StdoutText() != "cmd\n" || len(res.Stderr) != 0 {
		t.Errorf("command after setup: %v, exit %d, stdout %q, stderr %q: want only its own output", err, res.ExitCode, res.StdoutText(), res.StderrText())
	}
	// Many execs, one container: state left by one is seen by the next.
	mustExec(t, s, "echo 1 > /tmp/state")
	if got := mustExec(t, s, "cat /tmp/state"); got != "1\n" {
		t.Errorf("second exec saw %q", got)
	}

	resumed := spawnSession(t, o, spec, orchestrator.SpawnOptions{DisableSetup: true})
	if len(resumed.SetupStdout()) != 0 || len(resumed.SetupStderr()) != 0 {
		t.Errorf("DisableSetup: setup output %q %q", resumed.SetupStdout(), resumed.SetupStderr())
	}
	if res, err := resumed.Exec(t.Context(), shReq("test -e /tmp/setup-ran")); err != nil || res.ExitCode == 0 {
		t.Errorf("DisableSetup: setup ran anyway (%v, exit %d)", err, res.ExitCode)
	}
}

// A failed setup fails the spawn with its output, and leaves nothing behind.
func TestContainerSeed000FailedSetupFailsSpawn(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := containerTask(t)
	spec := orchestrator.ContainerSpec{Name: name, Setup: []string{"echo before", "echo boom >&2; exit 3", "echo never"}}
	s, err := o.Spawn(t.Context(), spec, orchestrator.SpawnOptions{})
	if s != nil {
		_ = s.Cleanup(context.Background())
		t.Fatal("spawn succeeded with a failing setup command")
	}
	var se *orchestrator.SetupError
	if !errors.As(err, &se) || !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Fatalf("err %v: want a *SetupError matching ErrUnavailable", err)
	}
	if se.Index != 1 || se.ExitCode != 3 || string(se.SetupStdout) != "before\n" || string(se.SetupStderr) != "boom\n" {
		t.Errorf("setup error %+v", se)
	}
	if !strings.Contains(err.Error(), "boom") {
		t.Errorf("message %q does not carry the setup output", err)
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources left after a failed setup", n)
	}
}

// A one-shot run bind-mounts the workspace at the workdir, so the command's
// file edits land on the host with no copy step; the container is removed afterwards.
func TestContainerSeed002OneShotEditLandsOnHost(t *testing.T) {
	o, _ := newOrchestrator(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("input"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := containerTask(t)
	spec := orchestrator.ContainerSpec{Name: name, Workspace: ws, Env: map[string]string{"TASK_ID": "abc123"},
		Setup: []string{"echo prepared"}}
	res, err := o.Run(t.Context(), spec, []string{"sh", "-c", "cat in.txt; echo \"edited $TASK_ID\" > out.txt; pwd >&2; exit 5"}, orchestrator.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 5 || res.StdoutText() != "input" || res.StderrText() != "/workspace\n" || string(res.SetupStdout) != "prepared\n" {
		t.Errorf("result: exit %d, stdout %q, stderr %q, setup %q", res.ExitCode, res.StdoutText(), res.StderrText(), res.SetupStdout)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "edited abc123\n" {
		t.Errorf("host file: %q, %v", b, err)
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources left after a one-shot run", n)
	}
}

// In host-uid mode (HUID/HGID) the process runs as the host's uid:gid, so files it
// creates in the workspace belong to the host user.
func TestContainerSeed000HostUIDOwnsFiles(t *testing.T) {
	o, _ := newOrchestrator(t)
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	spec := orchestrator.ContainerSpec{Name: containerTask(t), Workspace: ws, HostUser: &orchestrator.HostUser{UID: 4321, GID: 4322}}
	res, err := o.Run(t.Context(), spec, []string{"sh", "-c", "echo $(id -u):$(id -g) $HUID:$HGID; echo data > made.txt"}, orchestrator.RunOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d, stderr %q", err, res.ExitCode, res.StderrText())
	}
	if got := res.StdoutText(); got != "4321:4322 4321:4322\n" {
		t.Errorf("ids in the container: %q", got)
	}
	fi, err := os.Stat(filepath.Join(ws, "made.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 {
		t.Errorf("made.txt is owned by %d:%d on the host, want 4321:4322", st.Uid, st.Gid)
	}
}

// Poll() is nil while the command runs and its exit code after; kill() stops it;
// stream() yields its output as it arrives.
func TestContainerSeed000PollAndKillLongCommand(t *testing.T) {
	o, _ := newOrchestrator(t)
	s := spawnSession(t, o, orchestrator.ContainerSpec{Name: containerTask(t)}, orchestrator.SpawnOptions{})
	if s.Poll() != nil {
		t.Error("Poll before any command is not nil")
	}
	p, err := s.Start(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "echo started; exec sleep 300"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(context.Background()) })
	ev, ok := <-p.Events()
	if !ok || ev.Stream != orchestrator.StreamStdout || string(ev.Data) != "started\n" {
		t.Fatalf("first event %v %q, want stdout \"started\"", ok, ev.Data)
	}
	if code := s.Poll(); code != nil {
		t.Fatalf("Poll of a running command = %d, want nil", *code)
	}
	if code := p.Poll(); code != nil {
		t.Fatalf("Process.Poll of a running command = %d, want nil", *code)
	}
	if err := s.Kill(t.Context()); err != nil {
		t.Fatal(err)
	}
	code := s.Poll()
	if code == nil || *code == 0 {
		t.Fatalf("Poll after Kill = %v, want a non-zero exit code", code)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != *code {
		t.Errorf("Wait after Kill: %v, exit %d (Poll said %d)", err, res.ExitCode, *code)
	}
	if out := mustExec(t, s, "ps -o args | grep -c '[s]leep 300' || true"); strings.TrimSpace(out) != "0" {
		t.Errorf("sleep still running after Kill: %q", out)
	}
	// A command that finishes by itself: Poll gives its code.
	p2, err := s.Start(t.Context(), shReq("exit 9"))
	if err != nil {
		t.Fatal(err)
	}
	for range p2.Events() {
	}
	<-p2.Done()
	if code := s.Poll(); code == nil || *code != 9 {
		t.Errorf("Poll after exit 9 = %v", code)
	}
}

// The configured timeout is enforced, and a run under timeout leaves no container.
func TestContainerSeed001RunTimeoutLeavesNoContainer(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := containerTask(t)
	start := time.Now()
	res, err := o.Run(t.Context(), orchestrator.ContainerSpec{Name: name}, []string{"sh", "-c", "echo partial; sleep 300"},
		orchestrator.RunOptions{Timeout: 500 * time.Millisecond})
	if !errors.Is(err, orchestrator.ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	if res.StdoutText() != "partial\n" {
		t.Errorf("partial output %q", res.StdoutText())
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("run took %s", d)
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources left after a timed-out run", n)
	}
}

// Cancelling a run (its unique container is the handle) kills the command and
// removes the container.
func TestContainerSeed002CancelRunLeavesNoContainer(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := containerTask(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The command's first output cancels the run: it is certainly running by then.
	out := containerWriterFunc(func(b []byte) (int, error) { cancel(); return len(b), nil })
	_, err := o.Run(ctx, orchestrator.ContainerSpec{Name: name}, []string{"sh", "-c", "echo started; exec sleep 300"},
		orchestrator.RunOptions{Stdout: out})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources left after a cancelled run", n)
	}
}

type containerWriterFunc func([]byte) (int, error)

func (f containerWriterFunc) Write(b []byte) (int, error) { return f(b) }

// Cleanup() is final; the runtime cannot be reused afterwards.
func TestContainerSeed000ExecAfterCleanupFails(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := containerTask(t)
	s := spawnSession(t, o, orchestrator.ContainerSpec{Name: name}, orchestrator.SpawnOptions{})
	if err := s.WriteFile(t.Context(), "note.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadFile(t.Context(), "/workspace/note.txt"); err != nil || string(b) != "x" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources left after cleanup", n)
	}
	if _, err := s.Exec(t.Context(), shReq("true")); !errors.Is(err, orchestrator.ErrUnavailable) || !strings.Contains(err.Error(), "cleaned up") {
		t.Errorf("exec after cleanup: %v, want ErrUnavailable", err)
	}
	if _, err := s.Start(t.Context(), shReq("true")); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Errorf("start after cleanup: %v, want ErrUnavailable", err)
	}
	if _, err := s.ReadFile(t.Context(), "note.txt"); !errors.Is(err, orchestrator.ErrUnavailable) {
		t.Errorf("read after cleanup: %v, want ErrUnavailable", err)
	}
	if err := s.Cleanup(t.Context()); err != nil {
		t.Errorf("second cleanup: %v", err)
	}
}

// The spec's bind mounts pass the policy, but the docker socket and system
// directories stay refused; host networking needs the policy's permission.
func TestContainerSeed001PolicyStillRefusesDangerousMounts(t *testing.T) {
	o, _ := newOrchestrator(t)
	name := containerTask(t)
	for _, spec := range []orchestrator.ContainerSpec{
		{Name: name, Mounts: []orchestrator.Mount{{Source: "/var/run/docker.sock", Target: "/sock"}}},
		{Name: name, Mounts: []orchestrator.Mount{{Source: "/etc", Target: "/host-etc", ReadOnly: true}}},
		{Name: name, Assets: []orchestrator.Asset{{Source: "/proc", SavePath: "proc"}}},
		{Name: name, Network: orchestrator.NetworkHost},
	} {
		s, err := o.Spawn(t.Context(), spec, orchestrator.SpawnOptions{})
		if s != nil {
			_ = s.Cleanup(context.Background())
		}
		if !errors.Is(err, orchestrator.ErrPolicyViolation) {
			t.Errorf("%+v: err %v, want ErrPolicyViolation", spec, err)
		}
	}
	if n := taskLeftovers(t, o, name); n != 0 {
		t.Errorf("%d resources created for refused specs", n)
	}
}

// A spec built from a Dockerfile (a harness's environment image) is built once
// per content, as a task's build service is, and every session of it runs that image.
func TestContainerSeed000BuildOncePerContent(t *testing.T) {
	o, rec := newOrchestrator(t)
	c := dockerClient(t, o)
	name := containerTask(t)
	t.Cleanup(func() {
		list, err := c.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labels.LabelTask+"="+name))})
		if err != nil {
			t.Errorf("list images: %v", err)
		}
		for _, img := range list {
			if _, err := c.ImageRemove(context.Background(), img.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
				t.Errorf("remove image %s: %v", img.ID, err)
			}
		}
	})
	dir := t.TempDir()
	df := "ARG " + compose.BaseImageEnv + "\nFROM ${" + compose.BaseImageEnv + "}\nRUN echo built > /built\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile.env"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := orchestrator.ContainerSpec{Name: name, Build: &orchestrator.ContainerBuild{Context: dir, Dockerfile: "Dockerfile.env"}}
	for range 2 {
		s := spawnSession(t, o, spec, orchestrator.SpawnOptions{})
		if got := mustExec(t, s, "cat /built"); got != "built\n" {
			t.Errorf("/built: %q", got)
		}
	}
	if n := rec.count(orchestrator.EventImageBuilt); n != 1 {
		t.Errorf("%d builds for two sessions of one Dockerfile, want 1", n)
	}
}

// Each spawn is its own runtime; cleaning one up leaves the others of the same spec
// running (their task name, and so their labels, are the same).
func TestContainerSeed000SessionsOfOneSpecAreIndependent(t *testing.T) {
	o, _ := newOrchestrator(t)
	spec := orchestrator.ContainerSpec{Name: containerTask(t)}
	a := spawnSession(t, o, spec, orchestrator.SpawnOptions{})
	b := spawnSession(t, o, spec, orchestrator.SpawnOptions{})
	if err := a.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, b, "echo alive"); got != "alive\n" {
		t.Errorf("the other session: %q", got)
	}
	// A spawn that fails (its setup) does not take the live one down either.
	failing := spec
	failing.Setup = []string{"exit 1"}
	if _, err := o.Spawn(t.Context(), failing, orchestrator.SpawnOptions{}); err == nil {
		t.Fatal("spawn with a failing setup succeeded")
	}
	if got := mustExec(t, b, "echo still"); got != "still\n" {
		t.Errorf("the other session after a failed spawn: %q", got)
	}
}
