package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/orchestrator"
)

// privateDaemon is a dockerd of the test's own: its own data and exec roots, socket, pid
// file and bridge, so that stopping it touches nothing else on the host.
type privateDaemon struct {
	t      *testing.T
	dir    string
	sock   string
	bridge string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startPrivateDaemon starts a dockerd for this test alone, torn down (with its bridge and
// its directories) at the end of the test. It skips the test when that cannot be done here.
func startPrivateDaemon(t *testing.T) *privateDaemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("daemon loss: a private dockerd needs root")
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Skip("daemon loss: no dockerd binary to start a private daemon with")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("daemon loss: no ip(8) to make the private daemon's bridge with")
	}
	// A short directory: the socket path must fit in a sockaddr_un.
	dir, err := os.MkdirTemp("", "cbxdl")
	if err != nil {
		t.Fatal(err)
	}
	n := rand.IntN(200) + 20
	d := &privateDaemon{t: t, dir: dir, sock: filepath.Join(dir, "d.sock"), bridge: fmt.Sprintf("cbxdl%d", n)}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// The host daemon's bridge must outlive this test.
	if _, err := net.InterfaceByName("docker0"); err == nil {
		t.Cleanup(func() {
			if _, err := net.InterfaceByName("docker0"); err != nil {
				t.Errorf("the host's docker0 is gone after the private daemon ran: %v", err)
			}
		})
	}
	run("link", "add", d.bridge, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", d.bridge).Run() })
	run("addr", "add", fmt.Sprintf("10.216.%d.1/24", n), "dev", d.bridge)
	run("link", "set", d.bridge, "up")
	// A configuration of its own: the host's /etc/docker/daemon.json is the host daemon's.
	config := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(config, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.args = []string{
		"--config-file", config,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"-H", "unix://" + d.sock,
		"--bridge", d.bridge,
		// No chains of its own: the host's daemon owns the iptables chains. No
		// --default-address-pool either: a daemon restarted with one deletes the interface
		// docker0 whatever its --bridge says, and docker0 is the host daemon's. Its project
		// networks come from composebox's managed subnets.
		"--iptables=false", "--ip6tables=false", "--ip-masq=false",
		"--storage-driver", "vfs",
		"--containerd-namespace", "cbxdl" + strconv.Itoa(n),
		"--containerd-plugins-namespace", "cbxdl" + strconv.Itoa(n) + "p",
	}
	d.args = append([]string{dockerd}, d.args...)
	d.start()
	t.Cleanup(d.stop)
	return d
}

// start runs the daemon and waits until it answers.
func (d *privateDaemon) start() {
	d.t.Helper()
	logf, err := os.OpenFile(filepath.Join(d.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = exec.Command(d.args[0], d.args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Its own process group, so that stopping it reaches its containerd too.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("start dockerd: %v", err)
	}
	d.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.cmd, d.exited)
	c := d.client()
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.exited:
			log, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
			d.t.Fatalf("private dockerd exited: %s", tail(string(log), 3000))
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("private dockerd not answering after 2 minutes: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the daemon's socket until it answers
	}
}

// stop stops the daemon (SIGTERM, then SIGKILL to its whole group) and waits for it.
func (d *privateDaemon) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	}
	d.cmd = nil
}

func (d *privateDaemon) client() *client.Client {
	d.t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost("unix://"+d.sock), client.WithAPIVersionNegotiation())
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestDaemonLoss stops the engine under a live sample. Every call then fails, within a bounded
// time, as ErrUnavailable (none hangs), and once the engine is back, Task.Cleanup removes
// everything the task made.
func TestDaemonLoss(t *testing.T) {
	d := startPrivateDaemon(t)
	c := d.client()
	t.Cleanup(func() { _ = c.Close() })
	o, err := orchestrator.New(orchestrator.WithClient(c), orchestrator.WithStateDir(t.TempDir()),
		orchestrator.WithSubnets(orchestrator.Subnets{Pool: netip.MustParsePrefix("10.218.0.0/16")}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	task, err := o.TaskInit(ctx, orchestrator.TaskSpec{Name: "daemon-loss"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = task.Cleanup(context.Background(), orchestrator.CleanupOptions{Timeout: time.Minute}) })
	s, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
	if err != nil {
		t.Fatal(err)
	}
	sb := s.Default()
	if res, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"echo", "up"}}); err != nil || res.StdoutText() != "up\n" {
		t.Fatalf("exec before the loss: %q %v", res.StdoutText(), err)
	}
	running, err := sb.ExecStream(ctx, orchestrator.ExecRequest{Cmd: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	label := labels.LabelTask + "=daemon-loss"
	if testutil.Resources(t, c, label) == 0 {
		t.Fatal("no resource of the sample found on the private daemon")
	}

	d.stop()

	// Every call must come back as ErrUnavailable well before its own ctx ends: an answer of
	// ErrTimeout (or no answer) would be a hang.
	bounded := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		err := call(cctx)
		if !errors.Is(err, orchestrator.ErrUnavailable) || cctx.Err() != nil {
			t.Errorf("%s with the daemon gone: %v (after %s), want ErrUnavailable", what, err, time.Since(start).Round(time.Millisecond))
		}
	}
	bounded("running exec", func(context.Context) error { _, err := running.Wait(); return err })
	bounded("exec", func(ctx context.Context) error {
		_, err := sb.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		return err
	})
	bounded("exec stream", func(ctx context.Context) error {
		_, err := sb.ExecStream(ctx, orchestrator.ExecRequest{Cmd: []string{"true"}})
		return err
	})
	bounded("read file", func(ctx context.Context) error { _, err := sb.ReadFile(ctx, "/etc/hostname"); return err })
	bounded("write file", func(ctx context.Context) error { return sb.WriteFile(ctx, "/tmp/x", []byte("x")) })
	bounded("open", func(ctx context.Context) error { _, err := o.Open(ctx, s.Project()); return err })
	bounded("sample init", func(ctx context.Context) error {
		s2, err := task.SampleInit(ctx, orchestrator.SampleSpec{})
		if err == nil {
			_ = s2.Cleanup(context.Background())
		}
		return err
	})
	bounded("sample cleanup", func(ctx context.Context) error {
		return s.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Minute})
	})
	bounded("task cleanup", func(ctx context.Context) error {
		return task.Cleanup(ctx, orchestrator.CleanupOptions{Timeout: time.Minute})
	})

	d.start()
	if err := task.Cleanup(t.Context()); err != nil {
		t.Fatalf("task cleanup once the daemon is back: %v", err)
	}
	if n := testutil.Resources(t, c, label); n != 0 {
		t.Fatalf("%d containers, networks and volumes of the task left on the daemon after its cleanup", n)
	}
}
