package egressgw

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Denial is one refused lookup or connection: the egress_denied event.
type Denial struct {
	Time time.Time `json:"time"`
	// Client is the address the attempt came from; Service the container it belongs to, when
	// the engine's resolver names it.
	Client  string `json:"client,omitempty"`
	Service string `json:"service,omitempty"`
	// Name is the name asked for (DNS query, SNI, Host); Address the address, when there is
	// no name.
	Name    string `json:"name,omitempty"`
	Address string `json:"address,omitempty"`
	Port    int    `json:"port,omitempty"`
	// Protocol is dns, tls, http or tcp.
	Protocol string `json:"protocol"`
	Reason   string `json:"reason"`
}

// Config is what a gateway serves.
type Config struct {
	// Allow is the allowlist of a client whose service has none of its own in Services;
	// SetAllow changes both on a live gateway.
	Allow Allowlist
	// Services are the allowlists of services, by the name ServiceOf gives.
	Services map[string]Allowlist
	// ServiceOf names the service at a client address (empty when unknown).
	ServiceOf func(ctx context.Context, client netip.Addr) string
	// Upstream is the resolver allowed names are resolved through ("10.0.0.53:53").
	Upstream string
	// Listen are the addresses the sample reaches the gateway at: DNS and the proxy listen on
	// each, and an allowed name resolves to the one the query came to.
	Listen []netip.Addr
	// OnDenied receives every denial. It must not block for long.
	OnDenied func(Denial)
	Log      *slog.Logger
	// PeekTimeout bounds the wait for a client's first bytes (zero: 10s).
	PeekTimeout time.Duration
	// ForwardZones are domains whose names are the sample's own (on Kubernetes, its
	// namespace's "<ns>.svc.cluster.local"): a query for a name in one goes, as it is, to
	// ForwardTo, whatever the allowlist, so that the sample's services still find each other.
	// The server there must answer those names itself and send nothing further out (the
	// cluster's DNS is authoritative for its domain).
	ForwardZones []string
	ForwardTo    string
}

// Gateway serves one sample.
type Gateway struct {
	cfg      Config
	mu       sync.RWMutex
	allow    Allowlist
	services map[string]Allowlist
	dnsc     *dns.Client
	// resolved caches upstream answers for their TTL (at most resolvedTTL): a client's lookup
	// and the connection that follows it at once ask the same question, and the second need
	// not cross to the upstream again.
	resolvedMu sync.Mutex
	resolved   map[string]resolution
	now        func() time.Time
}

// resolvedTTL bounds how long an upstream answer is reused, whatever its own TTL.
const resolvedTTL = 30 * time.Second

// resolution is an upstream answer and until when it holds.
type resolution struct {
	addrs []netip.Addr
	until time.Time
}

// New returns a gateway; Serve runs it.
func New(cfg Config) *Gateway {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PeekTimeout == 0 {
		cfg.PeekTimeout = 10 * time.Second
	}
	return &Gateway{cfg: cfg, allow: cfg.Allow, services: cfg.Services, dnsc: &dns.Client{Timeout: 5 * time.Second},
		resolved: map[string]resolution{}, now: time.Now}
}

// SetAllow replaces the allowlists: a for every service without one in services. Ports the
// gateway did not listen on at start stay closed.
func (g *Gateway) SetAllow(a Allowlist, services map[string]Allowlist) {
	g.mu.Lock()
	g.allow, g.services = a, services
	g.mu.Unlock()
}

// allowFor is the allowlist of the client at addr, and its service's name.
func (g *Gateway) allowFor(ctx context.Context, addr net.Addr) (Allowlist, string) {
	svc := ""
	if g.cfg.ServiceOf != nil {
		if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
			svc = g.cfg.ServiceOf(ctx, ap.Addr().Unmap())
		}
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if a, ok := g.services[svc]; ok {
		return a, svc
	}
	return g.allow, svc
}

func (g *Gateway) deny(client net.Addr, service string, d Denial) {
	d.Time = time.Now().UTC()
	d.Service = service
	if ap, err := netip.ParseAddrPort(client.String()); err == nil {
		d.Client = ap.Addr().Unmap().String()
	}
	g.cfg.Log.Info("egress denied", "client", d.Client, "name", d.Name, "address", d.Address, "port", d.Port, "protocol", d.Protocol, "reason", d.Reason)
	if g.cfg.OnDenied != nil {
		g.cfg.OnDenied(d)
	}
}

// Serve listens on every Listen address for DNS (udp and tcp 53) and on every port of ports
// for the proxy, until ctx ends. A port that cannot be bound is an error.
func (g *Gateway) Serve(ctx context.Context, dnsPort int, ports []int) error {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			_ = c.Close()
		}
	}()
	errc := make(chan error, 1)
	for _, addr := range g.cfg.Listen {
		self := addr
		h := dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) { g.serveDNS(ctx, w, m, self) })
		pc, err := net.ListenPacket("udp", netip.AddrPortFrom(addr, uint16(dnsPort)).String())
		if err != nil {
			return fmt.Errorf("egress gateway: listen dns on %s: %w", addr, err)
		}
		tl, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(dnsPort)).String())
		if err != nil {
			_ = pc.Close()
			return fmt.Errorf("egress gateway: listen dns on %s: %w", addr, err)
		}
		for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: tl, Handler: h}} {
			closers = append(closers, closerFunc(func() error { return s.Shutdown() }))
			go func() {
				if err := s.ActivateAndServe(); err != nil && ctx.Err() == nil {
					select {
					case errc <- err:
					default:
					}
				}
			}()
		}
		for _, port := range ports {
			l, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
			if err != nil {
				return fmt.Errorf("egress gateway: listen on %s port %d: %w", addr, port, err)
			}
			closers = append(closers, l)
			go g.accept(ctx, l, port)
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("egress gateway: dns: %w", err)
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// serveDNS answers a query from the sample. A name not on the list gets NXDOMAIN and is never
// sent anywhere. An allowed name's A query is resolved upstream (so that a name that does not
// exist still does not), and answered with the gateway's own address: the connection then comes
// to the proxy. Every other type of an allowed name gets an empty answer: no AAAA (no IPv6
// around the list), no TXT, nothing that carries data out or in.
func (g *Gateway) serveDNS(ctx context.Context, w dns.ResponseWriter, req *dns.Msg, self netip.Addr) {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.RecursionAvailable = true
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	name := normalise(q.Name)
	if g.forwarded(name) {
		g.forward(ctx, w, req)
		return
	}
	allow, svc := g.allowFor(ctx, w.RemoteAddr())
	if !allow.AllowsName(name) {
		resp.Rcode = dns.RcodeNameError
		_ = w.WriteMsg(resp)
		g.deny(w.RemoteAddr(), svc, Denial{Name: name, Port: 53, Protocol: "dns", Reason: "name not allowed (" + dns.TypeToString[q.Qtype] + " query)"})
		return
	}
	if q.Qtype == dns.TypeA && q.Qclass == dns.ClassINET {
		addrs, err := g.resolve(ctx, name)
		switch {
		case err != nil:
			resp.Rcode = dns.RcodeServerFailure
		case len(addrs) == 0:
			resp.Rcode = dns.RcodeNameError
		default:
			resp.Answer = append(resp.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
				A:   self.AsSlice(),
			})
		}
	}
	_ = w.WriteMsg(resp)
}

// forwarded reports a name inside one of the forward zones.
func (g *Gateway) forwarded(name string) bool {
	for _, z := range g.cfg.ForwardZones {
		if z = normalise(z); z != "" && (name == z || strings.HasSuffix(name, "."+z)) {
			return true
		}
	}
	return false
}

// forward relays a query for the sample's own names to ForwardTo, over the transport it came
// on, and its answer back.
func (g *Gateway) forward(ctx context.Context, w dns.ResponseWriter, req *dns.Msg) {
	c := &dns.Client{Timeout: 5 * time.Second}
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		c.Net = "tcp"
	}
	in, _, err := c.ExchangeContext(ctx, req, g.cfg.ForwardTo)
	if err != nil {
		resp := new(dns.Msg)
		resp.SetRcode(req, dns.RcodeServerFailure)
		_ = w.WriteMsg(resp)
		return
	}
	in.Id = req.Id
	_ = w.WriteMsg(in)
}

// resolve asks the upstream resolver for name's IPv4 addresses, or reuses its answer while the
// answer's TTL (at most resolvedTTL) lasts. Failures and empty answers are asked again.
func (g *Gateway) resolve(ctx context.Context, name string) ([]netip.Addr, error) {
	g.resolvedMu.Lock()
	r, ok := g.resolved[name]
	g.resolvedMu.Unlock()
	if ok && g.now().Before(r.until) {
		return r.addrs, nil
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.RecursionDesired = true
	in, _, err := g.dnsc.ExchangeContext(ctx, m, g.cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("resolve %s through %s: %w", name, g.cfg.Upstream, err)
	}
	var out []netip.Addr
	ttl := resolvedTTL
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
				out = append(out, ip)
				ttl = min(ttl, time.Duration(a.Hdr.Ttl)*time.Second)
			}
		}
	}
	if len(out) > 0 && ttl > 0 {
		g.resolvedMu.Lock()
		if len(g.resolved) >= maxResolved {
			clear(g.resolved) // a sample that looks up many names: start over rather than grow
		}
		g.resolved[name] = resolution{addrs: out, until: g.now().Add(ttl)}
		g.resolvedMu.Unlock()
	}
	return out, nil
}

// maxResolved bounds the cache of upstream answers.
const maxResolved = 4096

func (g *Gateway) accept(ctx context.Context, l net.Listener, port int) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go g.proxy(ctx, c, port)
	}
}

// recorder keeps what a peek read, to replay it to the upstream.
type recorder struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// Writes during a peek (a TLS alert) go nowhere: the client must not see the peek.
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }

// errPeeked stops the TLS handshake once the ClientHello has given its SNI.
var errPeeked = errors.New("peeked")

// peekName reads the client's first bytes and finds the name it wants: the SNI of a TLS
// ClientHello (parsed by crypto/tls, on a connection that records and writes nothing), or the
// Host of an HTTP request.
func peekName(c net.Conn) (name, protocol string, head []byte, err error) {
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		return "", "tcp", nil, err
	}
	rec := &recorder{Conn: readerConn{Conn: c, r: br}}
	if first[0] == 0x16 { // TLS handshake record
		var sni string
		_ = tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			return nil, errPeeked
		}}).Handshake()
		return sni, "tls", rec.buf.Bytes(), nil
	}
	req, err := http.ReadRequest(bufio.NewReader(rec))
	if err != nil {
		return "", "tcp", rec.buf.Bytes(), nil
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	// A request may have been read in part past its headers; replay everything read.
	return host, "http", rec.buf.Bytes(), nil
}

type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// proxy serves one connection: the name must be allowed on this port, it must resolve, and the
// connection goes to one of its addresses and nowhere else.
func (g *Gateway) proxy(ctx context.Context, c net.Conn, port int) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(g.cfg.PeekTimeout))
	name, proto, head, err := peekName(c)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil && len(head) == 0 {
		return // closed before saying anything
	}
	allow, svc := g.allowFor(ctx, c.RemoteAddr())
	refuse := func(reason string) {
		d := Denial{Name: name, Port: port, Protocol: proto, Reason: reason}
		if name == "" {
			d.Address = localAddr(c)
		}
		if proto == "http" {
			// The agent sees why, rather than a reset it could take for a network fault.
			msg := "composebox egress: " + reason + "\n"
			fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
		}
		g.deny(c.RemoteAddr(), svc, d)
	}
	name = normalise(name)
	switch {
	case name == "":
		refuse("no TLS server name or HTTP Host")
		return
	case !allow.Allows(name, port):
		refuse("name not allowed on this port")
		return
	}
	addrs, err := g.resolve(ctx, name)
	if err != nil || len(addrs) == 0 {
		refuse("name does not resolve upstream")
		return
	}
	var up net.Conn
	d := net.Dialer{Timeout: 10 * time.Second}
	for _, a := range addrs {
		if up, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String()); err == nil {
			break
		}
	}
	if up == nil {
		g.cfg.Log.Debug("egress upstream unreachable", "name", name, "port", port, "err", err)
		return
	}
	defer up.Close()
	if _, err := up.Write(head); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func localAddr(c net.Conn) string {
	h, p, err := net.SplitHostPort(c.LocalAddr().String())
	if err != nil {
		return ""
	}
	return net.JoinHostPort(h, p)
}

// ParsePorts reads "80,443".
func ParsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("port %q: not 1-65535", f)
		}
		out = append(out, p)
	}
	return out, nil
}
