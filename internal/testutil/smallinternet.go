package testutil

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// SmallInternet is the outside world of the egress tests, in a network namespace of its own
// joined to the host by a veth pair: a DNS server for the test names (pkgs.test at Addr(2),
// other.test at Addr(3)) at Addr(53), HTTP servers at their addresses (pkgs.test on 80 and
// 8080, other.test on 80) and UDP listeners at pkgs.test's 443 and 53. It records every query,
// request and datagram it sees, so that a test can tell "refused" from "reached".
type SmallInternet struct {
	prefix  string // "10.98.N"
	mu      sync.Mutex
	queries []string
	hits    []string
	udp     int
}

// Addr is the address host of the small internet's /24.
func (s *SmallInternet) Addr(host int) string { return fmt.Sprintf("%s.%d", s.prefix, host) }

// Seen are the DNS queries (lower-case names), the HTTP requests ("who host/path") and the
// number of UDP datagrams the small internet received so far.
func (s *SmallInternet) Seen() (queries, hits []string, udp int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...), append([]string(nil), s.hits...), s.udp
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// inNetns runs f with this thread in netns: sockets f opens stay in it.
func inNetns(t testing.TB, netns string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := os.Open("/var/run/netns/" + netns)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(err) // this thread must not go back to the scheduler in the wrong namespace
		}
	}()
	f()
}

// StartSmallInternet builds the small internet on 10.98.N.0/24 (N from the process id, so that
// two test processes do not meet) and removes it at the test's end. It needs root.
func StartSmallInternet(t testing.TB) *SmallInternet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	n := os.Getpid()%200 + 20
	s := &SmallInternet{prefix: fmt.Sprintf("10.98.%d", n)}
	netns := fmt.Sprintf("cbxegress%d", os.Getpid())
	host, peer := fmt.Sprintf("cbxeh%d", os.Getpid()%100000), fmt.Sprintf("cbxen%d", os.Getpid()%100000)
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", host).Run()
		_ = exec.Command("ip", "netns", "del", netns).Run()
	})
	run(t, "ip", "netns", "add", netns)
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	run(t, "ip", "link", "set", peer, "netns", netns)
	run(t, "ip", "addr", "add", s.Addr(1)+"/24", "dev", host)
	run(t, "ip", "link", "set", host, "up")
	for _, a := range []int{2, 3, 53} {
		run(t, "ip", "-n", netns, "addr", "add", fmt.Sprintf("%s/24", s.Addr(a)), "dev", peer)
	}
	run(t, "ip", "-n", netns, "link", "set", peer, "up")
	run(t, "ip", "-n", netns, "link", "set", "lo", "up")
	run(t, "ip", "-n", netns, "route", "add", "default", "via", s.Addr(1))

	zone := map[string]string{"pkgs.test.": s.Addr(2), "other.test.": s.Addr(3)}
	dnsHandler := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(m)
		q := m.Question[0]
		s.mu.Lock()
		s.queries = append(s.queries, strings.ToLower(q.Name))
		s.mu.Unlock()
		if a, ok := zone[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(a)})
		} else if !ok {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})
	serve := func(addr, who string) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.hits = append(s.hits, who+" "+r.Host+r.URL.Path)
			s.mu.Unlock()
			fmt.Fprintf(w, "%s %s\n", who, r.URL.Path)
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	inNetns(t, netns, func() {
		pc, err := net.ListenPacket("udp", s.Addr(53)+":53")
		if err != nil {
			t.Fatal(err)
		}
		ds := &dns.Server{PacketConn: pc, Handler: dnsHandler}
		go func() { _ = ds.ActivateAndServe() }()
		t.Cleanup(func() { _ = ds.Shutdown() })
		serve(s.Addr(2)+":80", "pkgs")
		serve(s.Addr(2)+":8080", "pkgs8080")
		serve(s.Addr(3)+":80", "other")
		for _, port := range []string{":443", ":53"} {
			u, err := net.ListenPacket("udp", s.Addr(2)+port)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = u.Close() })
			go func() {
				buf := make([]byte, 2048)
				for {
					if _, _, err := u.ReadFrom(buf); err != nil {
						return
					}
					s.mu.Lock()
					s.udp++
					s.mu.Unlock()
				}
			}()
		}
	})
	return s
}

// StaticComposebox builds composebox as the egress gateway's image needs it (static), into the
// test's temporary directory, and returns its path.
func StaticComposebox(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "composebox")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/composebox/composebox/cmd/composebox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build composebox: %v\n%s", err, out)
	}
	return bin
}
