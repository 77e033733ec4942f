package egressgw

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// outside is a small internet on loopback: a DNS server for test names, and an HTTPS server
// (with httptest's CA) at pkgs.test's address and another at other.test's.
type outside struct {
	dnsAddr    string
	port       int
	pkgs, evil netip.Addr
	client     *http.Client
}

func startOutside(t *testing.T) outside {
	t.Helper()
	o := outside{pkgs: netip.MustParseAddr("127.0.0.2"), evil: netip.MustParseAddr("127.0.0.3")}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "pkgs ok") }))
	l, err := net.Listen("tcp", o.pkgs.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	cert, pool := testCA(t, "pkgs.test", "other.test")
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	o.port = l.Addr().(*net.TCPAddr).Port
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "evil reached") }))
	el, err := net.Listen("tcp", fmt.Sprintf("%s:%d", o.evil, o.port))
	if err != nil {
		t.Fatal(err)
	}
	evil.Listener = el
	evil.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	evil.StartTLS()
	t.Cleanup(evil.Close)
	o.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	zone := map[string]netip.Addr{"pkgs.test.": o.pkgs, "other.test.": o.evil}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ds := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(m)
		q := m.Question[0]
		if a, ok := zone[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: a.AsSlice()})
		} else if !ok {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})}
	go func() { _ = ds.ActivateAndServe() }()
	t.Cleanup(func() { _ = ds.Shutdown() })
	o.dnsAddr = pc.LocalAddr().String()
	return o
}

type denials struct {
	mu   sync.Mutex
	list []Denial
	ch   chan Denial
}

func (d *denials) add(x Denial) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
	d.ch <- x
}

// next waits for the next denial (no sleeps: the gateway reports before it returns to serving).
func (d *denials) next(t *testing.T) Denial {
	t.Helper()
	select {
	case x := <-d.ch:
		return x
	case <-time.After(10 * time.Second):
		t.Fatal("no egress_denied event")
		return Denial{}
	}
}

func TestGatewayAttackerSide(t *testing.T) {
	o := startOutside(t)
	self := netip.MustParseAddr("127.0.0.1")
	allow, err := ParseAllowlist([]string{fmt.Sprintf("pkgs.test:%d", o.port)})
	if err != nil {
		t.Fatal(err)
	}
	den := &denials{ch: make(chan Denial, 64)}
	g := New(Config{Allow: allow, Upstream: o.dnsAddr, Listen: []netip.Addr{self}, OnDenied: den.add})
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	dnsPort := freeUDPPort(t)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ctx, dnsPort, []int{o.port}) }()
	gwDNS := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", o.port), errc)

	query := func(name string, qtype uint16) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		in, _, err := new(dns.Client).Exchange(m, gwDNS)
		if err != nil {
			t.Fatalf("query %s: %v", name, err)
		}
		return in
	}

	t.Run("allowed name resolves to the gateway and is fetched", func(t *testing.T) {
		in := query("pkgs.test", dns.TypeA)
		if len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != self.String() {
			t.Fatalf("A pkgs.test = %v, want the gateway's %s", in.Answer, self)
		}
		body := fetch(t, o.client, "pkgs.test", self, o.port)
		if body != "pkgs ok" {
			t.Fatalf("fetch https://pkgs.test through the gateway = %q", body)
		}
	})
	t.Run("non-listed name is NXDOMAIN and reported", func(t *testing.T) {
		if in := query("other.test", dns.TypeA); in.Rcode != dns.RcodeNameError {
			t.Fatalf("A other.test rcode = %s, want NXDOMAIN", dns.RcodeToString[in.Rcode])
		}
		if d := den.next(t); d.Name != "other.test" || d.Protocol != "dns" {
			t.Fatalf("denial = %+v", d)
		}
	})
	t.Run("TXT query for a subdomain of a non-listed name never leaves", func(t *testing.T) {
		if in := query("c2VjcmV0.exfil.other.test", dns.TypeTXT); in.Rcode != dns.RcodeNameError || len(in.Answer) != 0 {
			t.Fatalf("TXT = %v", in)
		}
		if d := den.next(t); d.Name != "c2vjcmv0.exfil.other.test" {
			t.Fatalf("denial = %+v", d)
		}
	})
	t.Run("no AAAA and no TXT for an allowed name", func(t *testing.T) {
		for _, qt := range []uint16{dns.TypeAAAA, dns.TypeTXT} {
			if in := query("pkgs.test", qt); len(in.Answer) != 0 {
				t.Fatalf("%s pkgs.test answered %v", dns.TypeToString[qt], in.Answer)
			}
		}
	})
	t.Run("SNI of a non-listed name is refused and reported", func(t *testing.T) {
		_, err := tlsDial(o.client, "other.test", self, o.port)
		if err == nil {
			t.Fatal("TLS to other.test through the gateway succeeded")
		}
		if d := den.next(t); d.Name != "other.test" || d.Protocol != "tls" || d.Port != o.port {
			t.Fatalf("denial = %+v", d)
		}
	})
	t.Run("Host header of a non-listed name is refused and reported", func(t *testing.T) {
		c, err := net.Dial("tcp", netip.AddrPortFrom(self, uint16(o.port)).String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
		b, _ := io.ReadAll(c)
		if !strings.Contains(string(b), "403") || strings.Contains(string(b), "evil") {
			t.Fatalf("reply = %q", b)
		}
		if d := den.next(t); d.Name != "other.test" || d.Protocol != "http" {
			t.Fatalf("denial = %+v", d)
		}
	})
	t.Run("an allowed SNI goes only to the allowed name's addresses", func(t *testing.T) {
		// The attacker fronts pkgs.test: whatever it meant to reach, the gateway connects to
		// pkgs.test's own address, so the other server never answers.
		body := fetch(t, o.client, "pkgs.test", self, o.port)
		if body != "pkgs ok" {
			t.Fatalf("got %q", body)
		}
	})
	t.Run("live change closes the name", func(t *testing.T) {
		g.SetAllow(nil, nil)
		if in := query("pkgs.test", dns.TypeA); in.Rcode != dns.RcodeNameError {
			t.Fatalf("after SetAllow(nil) pkgs.test rcode = %s", dns.RcodeToString[in.Rcode])
		}
		den.next(t)
		if _, err := tlsDial(o.client, "pkgs.test", self, o.port); err == nil {
			t.Fatal("TLS to pkgs.test after closing succeeded")
		}
		den.next(t)
		g.SetAllow(allow, nil)
	})
}

func tlsDial(c *http.Client, name string, at netip.Addr, port int) (*tls.Conn, error) {
	cfg := c.Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = name
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", fmt.Sprintf("%s:%d", at, port), cfg)
}

func fetch(t *testing.T, c *http.Client, name string, at netip.Addr, port int) string {
	t.Helper()
	tr := c.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("%s:%d", at, port))
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(fmt.Sprintf("https://%s:%d/", name, port))
	if err != nil {
		t.Fatalf("fetch %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func freeUDPPort(t *testing.T) int {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

func waitTCP(t *testing.T, addr string, errc chan error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-errc:
			t.Fatalf("gateway: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("gateway never listened")
}

func TestParseAllowlist(t *testing.T) {
	a, err := ParseAllowlist([]string{"PKGS.test", "*.example.com:8443", "pkgs.test:8080"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		port int
		want bool
	}{
		{"pkgs.test", 443, true}, {"pkgs.test", 8080, true}, {"pkgs.test", 22, false},
		{"a.example.com", 8443, true}, {"example.com", 8443, false}, {"a.example.com", 443, false},
		{"evilpkgs.test", 443, false},
	} {
		if got := a.Allows(c.name, c.port); got != c.want {
			t.Errorf("Allows(%s, %d) = %v", c.name, c.port, got)
		}
	}
	if out := (Allowlist{{Name: "x.example.com", Ports: []int{443}}, {Name: "other.test", Ports: []int{443}}}).Within(a); len(out) != 2 {
		t.Errorf("Within = %v, want x.example.com:443 (port) and other.test:443", out)
	}
	for _, bad := range []string{"", "a b", "pkgs.test:0", "pkgs.test:x", "a.*.com"} {
		if _, err := ParseAllowlist([]string{bad}); err == nil {
			t.Errorf("ParseAllowlist(%q) accepted", bad)
		}
	}
}

// testCA makes a CA and a certificate it signs for names: the test's HTTPS servers use it.
func testCA(t *testing.T, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "composebox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// TestGatewayForwardZone: a name of the sample's own zone goes to the forward resolver, as it
// is and whatever the list; a name outside it, even one that ends like it, meets the list.
func TestGatewayForwardZone(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ds := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		mu.Lock()
		asked = append(asked, m.Question[0].Name)
		mu.Unlock()
		r := new(dns.Msg)
		r.SetReply(m)
		r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 244, 0, 9)})
		_ = w.WriteMsg(r)
	})}
	go func() { _ = ds.ActivateAndServe() }()
	t.Cleanup(func() { _ = ds.Shutdown() })
	den := &denials{ch: make(chan Denial, 64)}
	g := New(Config{Upstream: pc.LocalAddr().String(), Listen: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, OnDenied: den.add,
		ForwardZones: []string{"ns1.svc.cluster.local"}, ForwardTo: pc.LocalAddr().String()})
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	dnsPort := freeUDPPort(t)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ctx, dnsPort, nil) }()
	// DNS's TCP listener is bound after its UDP socket.
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", dnsPort), errc)
	query := func(name string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		in, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, fmt.Sprintf("127.0.0.1:%d", dnsPort))
		if err != nil {
			t.Fatalf("query %s: %v", name, err)
		}
		return in
	}
	if in := query("db.ns1.svc.cluster.local"); len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != "10.244.0.9" {
		t.Fatalf("a name of the zone: %v", in)
	}
	for _, name := range []string{"db.ns2.svc.cluster.local", "evil.test.xns1.svc.cluster.local"} {
		if in := query(name); in.Rcode != dns.RcodeNameError {
			t.Fatalf("%s: rcode %s, want NXDOMAIN", name, dns.RcodeToString[in.Rcode])
		}
		if d := den.next(t); d.Name != name {
			t.Fatalf("denial = %+v", d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"db.ns1.svc.cluster.local."}) {
		t.Fatalf("the forward resolver was asked %v", asked)
	}
}

// TestResolveReusesAnswersForTheirTTL: a connection right after its lookup does not ask the
// upstream again, an answer is asked again once its TTL (at most resolvedTTL) is over, and an
// answer with TTL 0 or no address is never reused.
func TestResolveReusesAnswersForTheirTTL(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	ttls := map[string]uint32{"pkgs.test.": 3600, "short.test.": 2, "zero.test.": 0}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ds := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		q := m.Question[0]
		mu.Lock()
		asked[q.Name]++
		mu.Unlock()
		r := new(dns.Msg)
		r.SetReply(m)
		if ttl, ok := ttls[q.Name]; ok {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IPv4(192, 0, 2, 7)})
		} else {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})}
	go func() { _ = ds.ActivateAndServe() }()
	t.Cleanup(func() { _ = ds.Shutdown() })
	g := New(Config{Upstream: pc.LocalAddr().String()})
	now := time.Now()
	g.now = func() time.Time { return now }
	resolve := func(name string) {
		t.Helper()
		if _, err := g.resolve(t.Context(), name); err != nil {
			t.Fatalf("resolve %s: %v", name, err)
		}
	}
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return asked[name+"."]
	}
	for _, name := range []string{"pkgs.test", "short.test", "zero.test", "missing.test"} {
		resolve(name)
		resolve(name)
	}
	if got := count("pkgs.test"); got != 1 {
		t.Errorf("pkgs.test asked %d times within its TTL, want 1", got)
	}
	if got := count("short.test"); got != 1 {
		t.Errorf("short.test asked %d times within its TTL, want 1", got)
	}
	if got := count("zero.test"); got != 2 {
		t.Errorf("zero.test (TTL 0) asked %d times, want 2", got)
	}
	if got := count("missing.test"); got != 2 {
		t.Errorf("missing.test (NXDOMAIN) asked %d times, want 2", got)
	}
	now = now.Add(3 * time.Second) // past short.test's TTL, within pkgs.test's
	resolve("short.test")
	resolve("pkgs.test")
	if count("short.test") != 2 || count("pkgs.test") != 1 {
		t.Errorf("after 3 s: short.test asked %d times (want 2), pkgs.test %d (want 1)", count("short.test"), count("pkgs.test"))
	}
	now = now.Add(resolvedTTL) // an hour's TTL is held no longer than resolvedTTL
	resolve("pkgs.test")
	if got := count("pkgs.test"); got != 2 {
		t.Errorf("pkgs.test asked %d times after resolvedTTL, want 2", got)
	}
}
