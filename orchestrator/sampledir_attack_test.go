package orchestrator_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// A root agent of a Terminal-Bench task leaves in its log directory, which the host keeps in
// <state>/sample-dirs/<project>/, a setuid-root copy of a program, a device node, a symlink to a
// secret host file and a FIFO, for whatever on the host reads the logs. The directory is a
// nosuid,nodev mount: the program runs on the host without its owner's rights, the device
// cannot be opened; removing the sample follows no symlink and opens no FIFO, and leaves no
// mount behind.
func TestAttackSampleDirPlantsAreInert(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent's files are root's on the host")
	}
	witness, err := exec.LookPath("id") // coreutils' id prints the effective uid it runs with
	if err != nil {
		t.Skip("no id(1)")
	}
	// The state directory must be traversable by nobody, who runs the planted program.
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(state), state} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := t.TempDir()
	for name, content := range map[string]string{
		"task.yaml": "instruction: leave something behind\n",
		"docker-compose.yaml": `
services:
  client:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["tail", "-f", "/dev/null"]
    volumes:
      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      - ${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}
`,
	} {
		if err := os.WriteFile(filepath.Join(task, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testutil.BaseImage(t)
	o, _ := newOrchestrator(t, orchestrator.WithStateDir(state))
	tk := taskInit(t, o, orchestrator.TaskSpec{Path: task})
	s := startSamples(t, tk, 1)[0]
	logs := filepath.Join(orchestrator.SampleDir(state, s.Project()), "logs")

	prog, err := os.ReadFile(witness)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Default().WriteFile(t.Context(), "/tmp/id", prog); err != nil {
		t.Fatal(err)
	}
	plant := `cp /tmp/id /logs/suid && chown 0:0 /logs/suid && chmod 4755 /logs/suid &&
mknod /logs/null c 1 3 && chmod 666 /logs/null &&
ln -s ` + secret + ` /logs/secret && mkfifo /logs/fifo && ls -l /logs`
	res, err := s.Default().Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", plant}, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the agent's planting: %v %q %q", err, res.StdoutText(), res.StderrText())
	}

	// The host's mount of the directory says nosuid and nodev.
	var st unix.Statfs_t
	if err := unix.Statfs(logs, &st); err != nil {
		t.Fatal(err)
	}
	if st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_NODEV == 0 {
		t.Errorf("%s is mounted with flags %#x: want nosuid and nodev", logs, st.Flags)
	}
	fi, err := os.Stat(filepath.Join(logs, "suid"))
	if err != nil || fi.Mode()&fs.ModeSetuid == 0 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the planted program: %v %v, want a setuid root file", fi, err)
	}
	// Run as nobody, it has nobody's rights. The same file elsewhere on the host shows the
	// witness would have told: it gets root's.
	if got := euidOf(t, filepath.Join(logs, "suid")); got != "65534" {
		t.Errorf("the planted setuid program ran on the host with euid %s, want nobody's 65534", got)
	}
	control := filepath.Join(state, "control")
	if err := os.WriteFile(control, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(control, 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if got := euidOf(t, control); got != "0" {
		t.Errorf("control: a setuid copy in the state directory, outside the sample's, runs with euid %s, want 0: the witness shows nothing", got)
	}
	// The device node cannot be opened on the host, even by root.
	if f, err := os.OpenFile(filepath.Join(logs, "null"), os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Errorf("the planted device node opens on the host")
	} else if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("open the planted device node: %v, want permission denied", err)
	}

	// Removal follows neither the symlink nor the FIFO, and leaves no mount.
	done := make(chan error, 1)
	go func() { done <- s.Cleanup(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cleanup: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("cleanup blocked on what the agent left")
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "host secret\n" {
		t.Errorf("the symlink's target after cleanup: %q, %v", b, err)
	}
	if _, err := os.Lstat(logs); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the log directory after cleanup: %v", err)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || bytes.Contains(mounts, []byte(state)) {
		t.Errorf("a mount under %s is left after cleanup (%v)", state, err)
	}
}

// euidOf runs the program at path as nobody, asking for its effective uid.
func euidOf(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), path, "-u")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run %s as nobody: %v: %s", path, err, out)
	}
	return strings.TrimSpace(string(out))
}
