// Command egress is `make bench-egress`: a sample behind its egress gateway (the allowlist
// pkgs.test) against one with unrestricted egress, side by side in one run, against a small
// internet the run builds in a network namespace (a DNS server and an HTTP and HTTPS server
// with a test CA): the throughput of a 100 MiB download, the time of a fresh connection (name
// lookup, TCP, TLS, first byte) at p50 and p99, and the gateway's memory per sample. The
// client is a static Go program (bench/egress/client) copied into the samples. Needs root.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/composebox/composebox/bench/internal/mdsection"
	"github.com/composebox/composebox/bench/internal/stats"
)

type options struct {
	Bin                           string
	MiB, Downloads, Connects, Mem int
	Out, Note                     string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	var o options
	fs := flag.NewFlagSet("egress", flag.ContinueOnError)
	fs.StringVar(&o.Bin, "bin", "bin/composebox", "the composebox binary (static: its gateway image is built from it)")
	fs.IntVar(&o.MiB, "mib", 100, "MiB per download")
	fs.IntVar(&o.Downloads, "downloads", 5, "downloads per scheme and side")
	fs.IntVar(&o.Connects, "connects", 300, "fresh connections per scheme and side")
	fs.IntVar(&o.Mem, "samples", 4, "restricted samples whose gateways' memory is read")
	fs.StringVar(&o.Out, "out", "", "also write the results into this Markdown file's bench-egress section")
	fs.StringVar(&o.Note, "note", "", "a note on the run's conditions, for the Markdown")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench-egress: needs root (a network namespace for the test's internet)")
		return 1
	}
	began := time.Now().UTC()
	res, err := measure(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-egress: %v\n", err)
		return 1
	}
	text := render(o, res, began, time.Since(began))
	fmt.Print(text)
	if o.Out != "" {
		if err := mdsection.Write(o.Out, "bench-egress", text); err != nil {
			fmt.Fprintf(os.Stderr, "bench-egress: %v\n", err)
			return 1
		}
	}
	return 0
}

type clientResult struct {
	DownloadSeconds []float64 `json:"download_seconds"`
	Bytes           int64     `json:"bytes"`
	ConnectSeconds  []float64 `json:"connect_seconds"`
}

// results: per scheme (http, https), per side (gateway, open).
type results struct {
	runs     map[string]map[string]*clientResult
	gateways []float64 // bytes of memory, one per restricted sample's gateway
}

const restrictedYAML = `services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sleep", "infinity"]
`

func measure(ctx context.Context, o options) (*results, error) {
	tmp, err := os.MkdirTemp("", "cbxbench-egress")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	prefix := fmt.Sprintf("10.97.%d", os.Getpid()%200+20)
	caPEM, cert, err := testCA()
	if err != nil {
		return nil, err
	}
	stopNet, err := startInternet(prefix, o.MiB, cert)
	if err != nil {
		return nil, err
	}
	defer stopNet()

	clientBin := filepath.Join(tmp, "client")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", clientBin, "./bench/egress/client")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the client: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "ca.pem"), caPEM, 0o644); err != nil {
		return nil, err
	}
	state := filepath.Join(tmp, "state")
	cbx := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, o.Bin, append([]string{"--state-dir", state}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("composebox %s: %v: %s", strings.Join(args, " "), err, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		return lines[len(lines)-1], nil
	}
	write := func(dir, yaml string) (string, error) {
		d := filepath.Join(tmp, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		return d, os.WriteFile(filepath.Join(d, "compose.yaml"), []byte(yaml), 0o644)
	}
	restrictedDir, err := write("restricted", restrictedYAML)
	if err != nil {
		return nil, err
	}
	openDir, err := write("open", restrictedYAML+"    extra_hosts: [\"pkgs.test:"+prefix+".2\"]\n")
	if err != nil {
		return nil, err
	}
	var projects []string
	defer func() {
		for _, p := range projects {
			if _, err := cbx("down", p); err != nil {
				fmt.Fprintln(os.Stderr, "bench-egress:", err)
			}
		}
	}()
	up := func(dir string, egress bool) (string, error) {
		args := []string{"up", "--task", "cbxbench-egress-" + filepath.Base(dir)}
		if egress {
			args = append(args, "--egress", "pkgs.test", "--egress-resolver", prefix+".53")
		}
		p, err := cbx(append(args, dir)...)
		if err == nil {
			projects = append(projects, p)
		}
		return p, err
	}
	gated, err := up(restrictedDir, true)
	if err != nil {
		return nil, err
	}
	open, err := up(openDir, false)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{gated, open} {
		for _, f := range []string{"client", "ca.pem"} {
			if out, err := exec.CommandContext(ctx, "docker", "cp", filepath.Join(tmp, f), p+"-default-1:/tmp/"+f).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("docker cp: %v: %s", err, out)
			}
		}
	}
	res := &results{runs: map[string]map[string]*clientResult{}}
	for i, scheme := range []string{"http", "https"} {
		res.runs[scheme] = map[string]*clientResult{}
		sides := []string{"gateway", "open"}
		if i%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			p := map[string]string{"gateway": gated, "open": open}[side]
			out, err := exec.CommandContext(ctx, "docker", "exec", p+"-default-1", "/tmp/client",
				"-big", fmt.Sprintf("%s://pkgs.test/big", scheme), "-small", fmt.Sprintf("%s://pkgs.test/small", scheme),
				"-downloads", fmt.Sprint(o.Downloads), "-connects", fmt.Sprint(o.Connects), "-ca", "/tmp/ca.pem").Output()
			if err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					return nil, fmt.Errorf("%s %s client: %v: %s", scheme, side, err, ee.Stderr)
				}
				return nil, err
			}
			var r clientResult
			if err := json.Unmarshal(out, &r); err != nil {
				return nil, fmt.Errorf("%s %s client: %v: %s", scheme, side, err, out)
			}
			if r.Bytes != int64(o.MiB)<<20 {
				return nil, fmt.Errorf("%s %s: downloaded %d bytes, want %d", scheme, side, r.Bytes, int64(o.MiB)<<20)
			}
			res.runs[scheme][side] = &r
		}
	}

	// The gateways' memory, with the first one having carried the transfers above.
	for range o.Mem - 1 {
		if _, err := up(restrictedDir, true); err != nil {
			return nil, err
		}
	}
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	for _, p := range projects {
		if p == open {
			continue
		}
		id := p + "-composebox-egress-1"
		st, err := dc.ContainerStatsOneShot(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", id, err)
		}
		var s container.StatsResponse
		err = json.NewDecoder(st.Body).Decode(&s)
		st.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("stats of %s: %w", id, err)
		}
		used := float64(s.MemoryStats.Usage) - float64(s.MemoryStats.Stats["inactive_file"])
		res.gateways = append(res.gateways, used)
	}
	return res, nil
}

func render(o options, r *results, began time.Time, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Egress gateway (`make bench-egress`)\n\n")
	fmt.Fprintf(&b, "Run %s UTC, %d cores, %s, %s in all. One sample behind its egress gateway (allowlist\n",
		began.Format("2006-01-02 15:04"), runtime.NumCPU(), runtime.Version(), took.Round(time.Second))
	fmt.Fprintf(&b, "`pkgs.test`) against one with unrestricted egress (the same name in its /etc/hosts), side by\n")
	fmt.Fprintf(&b, "side, against a server in a network namespace on this host. A static Go client in each sample\n")
	fmt.Fprintf(&b, "downloads %d MiB %d times, then opens %d fresh connections (name lookup, TCP, TLS for https,\n", o.MiB, o.Downloads, o.Connects)
	fmt.Fprintf(&b, "one small GET to its first byte), over HTTP and over HTTPS (a test CA; the gateway reads the\n")
	fmt.Fprintf(&b, "SNI and decrypts nothing).\n")
	if o.Note != "" {
		fmt.Fprintf(&b, "\n%s\n", o.Note)
	}
	fmt.Fprintf(&b, "\n| scheme | download MiB/s, gateway | unrestricted | ratio | connection p50, gateway | unrestricted | p99, gateway | unrestricted |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, scheme := range []string{"http", "https"} {
		g, u := r.runs[scheme]["gateway"], r.runs[scheme]["open"]
		tg, tu := throughput(o.MiB, g.DownloadSeconds), throughput(o.MiB, u.DownloadSeconds)
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.2f× | %s | %s | %s | %s |\n", scheme, tg, tu, tg/tu,
			ms(stats.Percentile(g.ConnectSeconds, 50)), ms(stats.Percentile(u.ConnectSeconds, 50)),
			ms(stats.Percentile(g.ConnectSeconds, 99)), ms(stats.Percentile(u.ConnectSeconds, 99)))
	}
	var sum float64
	for _, m := range r.gateways {
		sum += m
	}
	fmt.Fprintf(&b, "\nThroughput is the median download's. Gateway memory (the engine's usage less inactive page\n")
	fmt.Fprintf(&b, "cache) over %d restricted samples, the first after the transfers: %.1f MiB per sample on\n", len(r.gateways), sum/float64(len(r.gateways))/(1<<20))
	fmt.Fprintf(&b, "average (each: %s).\n", mibs(r.gateways))
	return b.String()
}

func throughput(mib int, secs []float64) float64 {
	return float64(mib) / stats.Percentile(secs, 50)
}

func ms(s float64) string { return fmt.Sprintf("%.2f ms", s*1000) }

func mibs(xs []float64) string {
	var out []string
	for _, x := range xs {
		out = append(out, fmt.Sprintf("%.1f", x/(1<<20)))
	}
	return strings.Join(out, ", ") + " MiB"
}

// testCA makes a CA and a certificate for pkgs.test signed by it.
func testCA() ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cbxbench-egress CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "pkgs.test"}, DNSNames: []string{"pkgs.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// startInternet builds the outside world in a network namespace joined to the host by a veth
// pair: a DNS server at .53 answering pkgs.test with .2, and HTTP (80) and HTTPS (443) at .2
// serving /big (mib MiB) and /small.
func startInternet(prefix string, mib int, cert tls.Certificate) (stop func(), err error) {
	netns := fmt.Sprintf("cbxbenchegress%d", os.Getpid())
	host, peer := fmt.Sprintf("cbxbh%d", os.Getpid()%100000), fmt.Sprintf("cbxbn%d", os.Getpid()%100000)
	var closers []func()
	stop = func() {
		for _, c := range closers {
			c()
		}
		_ = exec.Command("ip", "link", "del", host).Run()
		_ = exec.Command("ip", "netns", "del", netns).Run()
	}
	sh := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, a := range [][]string{
		{"netns", "add", netns},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", netns},
		{"addr", "add", prefix + ".1/24", "dev", host},
		{"link", "set", host, "up"},
		{"-n", netns, "addr", "add", prefix + ".2/24", "dev", peer},
		{"-n", netns, "addr", "add", prefix + ".53/24", "dev", peer},
		{"-n", netns, "link", "set", peer, "up"},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", netns, "route", "add", "default", "via", prefix + ".1"},
	} {
		if err := sh(a...); err != nil {
			stop()
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(int64(mib)<<20))
		_, _ = io.CopyN(w, zeros{}, int64(mib)<<20)
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	err = inNetns(netns, func() error {
		pc, err := net.ListenPacket("udp", prefix+".53:53")
		if err != nil {
			return err
		}
		ds := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
			r := new(dns.Msg)
			r.SetReply(m)
			q := m.Question[0]
			if strings.EqualFold(q.Name, "pkgs.test.") && q.Qtype == dns.TypeA {
				r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(prefix + ".2")})
			} else if !strings.EqualFold(q.Name, "pkgs.test.") {
				r.Rcode = dns.RcodeNameError
			}
			_ = w.WriteMsg(r)
		})}
		go func() { _ = ds.ActivateAndServe() }()
		closers = append(closers, func() { _ = ds.Shutdown() })
		for _, tlsOn := range []bool{false, true} {
			port := ":80"
			if tlsOn {
				port = ":443"
			}
			l, err := net.Listen("tcp", prefix+".2"+port)
			if err != nil {
				return err
			}
			if tlsOn {
				l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})
			}
			srv := &http.Server{Handler: mux}
			go func() { _ = srv.Serve(l) }()
			closers = append(closers, func() { _ = srv.Close() })
		}
		return nil
	})
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// inNetns runs f with this thread in netns: the sockets f opens stay in it.
func inNetns(netns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer orig.Close()
	ns, err := os.Open("/var/run/netns/" + netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return err
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(err) // this thread must not go back to the scheduler in the wrong namespace
		}
	}()
	return f()
}
