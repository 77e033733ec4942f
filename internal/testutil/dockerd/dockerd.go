// Package dockerd starts private Docker daemons for tests and benchmarks: each has its own data
// and exec roots, socket, pid file, bridge and containerd namespaces, so that stopping or
// removing it touches nothing else on the host (the host's daemon, its docker0 and its iptables
// chains stay as they are). It needs root, dockerd and ip(8).
package dockerd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/client"
)

// Options configure a daemon. The zero value is a daemon on a Unix socket alone.
type Options struct {
	// TLS also has the daemon listen on a loopback TCP port with TLS, client certificates
	// required: certificates made for it (crypto/x509) are in the daemon's directory.
	TLS bool
	// Prefix names the daemon's directory, bridge and containerd namespaces (default "cbxd").
	Prefix string
}

// Daemon is a running (or stopped) private dockerd.
type Daemon struct {
	// Dir holds everything the daemon has; Sock is its Unix socket.
	Dir, Sock string
	// Bridge is its default bridge, which it does not own: Remove deletes it.
	Bridge string
	// TCP is its TLS address (host:port) and ClientCerts the directory of ca.pem, cert.pem and
	// key.pem that reach it, with Options.TLS.
	TCP, ClientCerts string

	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Available says why no private daemon can be started here, nil when one can.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("a private dockerd needs root")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		return errors.New("no dockerd binary to start a private daemon with")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("no ip(8) to make the private daemon's bridge with")
	}
	return nil
}

// Start starts a daemon and waits until it answers. On error nothing is left behind.
func Start(opts Options) (d *Daemon, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "cbxd"
	}
	// A short directory: the socket path must fit in a sockaddr_un.
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	d = &Daemon{Dir: dir, Sock: filepath.Join(dir, "d.sock")}
	defer func() {
		if err != nil {
			d.Remove()
		}
	}()
	n, err := d.makeBridge(prefix)
	if err != nil {
		return nil, err
	}
	// A configuration of its own: the host's /etc/docker/daemon.json is the host daemon's.
	config := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(config, []byte("{}\n"), 0o644); err != nil {
		return nil, err
	}
	dockerd, _ := exec.LookPath("dockerd")
	ns := prefix + strconv.Itoa(n)
	d.args = []string{dockerd,
		"--config-file", config,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"-H", "unix://" + d.Sock,
		"--bridge", d.Bridge,
		// No chains of its own: the host's daemon owns the iptables chains. No
		// --default-address-pool either: a daemon restarted with one deletes the interface
		// docker0 whatever its --bridge says, and docker0 is the host daemon's. Its project
		// networks come from composebox's managed subnets.
		"--iptables=false", "--ip6tables=false", "--ip-masq=false",
		"--storage-driver", "vfs",
		"--containerd-namespace", ns,
		"--containerd-plugins-namespace", ns + "p",
	}
	if opts.TLS {
		if err := d.makeCerts(); err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		d.TCP = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		server := filepath.Join(dir, "tls-server")
		d.args = append(d.args, "-H", "tcp://"+d.TCP, "--tlsverify",
			"--tlscacert", filepath.Join(server, "ca.pem"),
			"--tlscert", filepath.Join(server, "cert.pem"),
			"--tlskey", filepath.Join(server, "key.pem"))
	}
	if err := d.Start(); err != nil {
		return nil, err
	}
	return d, nil
}

// makeBridge makes the daemon's bridge, with a number no other interface has, and returns
// that number.
func (d *Daemon) makeBridge(prefix string) (int, error) {
	for range 50 {
		n := rand.IntN(200) + 20
		name := fmt.Sprintf("%s%d", prefix, n)
		if _, err := net.InterfaceByName(name); err == nil {
			continue
		}
		if out, err := exec.Command("ip", "link", "add", name, "type", "bridge").CombinedOutput(); err != nil {
			if strings.Contains(string(out), "exists") {
				continue // taken in the meantime
			}
			return 0, fmt.Errorf("ip link add %s: %v: %s", name, err, out)
		}
		d.Bridge = name
		for _, args := range [][]string{{"addr", "add", fmt.Sprintf("10.216.%d.1/24", n), "dev", name}, {"link", "set", name, "up"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return 0, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
		return n, nil
	}
	return 0, errors.New("no free bridge name for a private dockerd")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs the daemon (again, after Stop) and waits until it answers.
func (d *Daemon) Start() error {
	if d.cmd != nil {
		return nil // running
	}
	logf, err := os.OpenFile(filepath.Join(d.Dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	d.cmd = exec.Command(d.args[0], d.args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Its own process group, so that stopping it reaches its containerd too.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.cmd = nil
		return fmt.Errorf("start dockerd: %w", err)
	}
	d.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.cmd, d.exited)
	c, err := d.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-d.exited:
			d.cmd = nil
			return fmt.Errorf("private dockerd exited: %s", d.LogTail(3000))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("private dockerd not answering after 2 minutes: %w", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the daemon's socket until it answers
	}
}

// Stop stops the daemon (SIGTERM, then SIGKILL to its whole group after a minute) and waits
// for it. Its containers stop with it; its data stays for Start.
func (d *Daemon) Stop() {
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

// Remove stops the daemon and removes its bridge and its directory.
func (d *Daemon) Remove() {
	d.Stop()
	if d.Bridge != "" {
		_ = exec.Command("ip", "link", "del", d.Bridge).Run()
	}
	// The data root holds the mounts of a daemon that was killed: unmount what is left.
	_ = exec.Command("sh", "-c", `grep -o " $0/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l`, d.Dir).Run()
	_ = os.RemoveAll(d.Dir)
}

// Client is a client of the daemon's socket.
func (d *Daemon) Client() (*client.Client, error) {
	return client.NewClientWithOpts(client.WithHost("unix://"+d.Sock), client.WithAPIVersionNegotiation())
}

// Endpoint is the daemon's socket as an endpoint: unix://SOCK.
func (d *Daemon) Endpoint() string { return "unix://" + d.Sock }

// LogTail is the end of the daemon's log, at most n bytes.
func (d *Daemon) LogTail(n int) string {
	log, _ := os.ReadFile(filepath.Join(d.Dir, "dockerd.log"))
	if len(log) > n {
		log = log[len(log)-n:]
	}
	return string(log)
}
