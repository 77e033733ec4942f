package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/composebox/composebox/internal/egressgw"
)

type egressGatewayOptions struct {
	Allow     []string
	AllowFile string
	Upstream  string
	Ports     string
	DNSPort   int
	Services  []string
	Project   string
	Ceiling   []string
	// ForwardZones and ForwardTo: the sample's own domain and the cluster DNS that answers it
	// (Kubernetes). ClientService names the service of every client (Kubernetes runs one
	// gateway per allowlist, which only that list's services reach).
	ForwardZones  []string
	ForwardTo     string
	ClientService string
}

// newEgressGatewayCmd is the egress gateway of a sample, run inside the sample by the engine
// side (see lifecycle's egress), never by hand: the composebox binary is the gateway's image.
func newEgressGatewayCmd() *cobra.Command {
	var opts egressGatewayOptions
	cmd := &cobra.Command{
		Use:    "__egress-gateway",
		Short:  "Serve a sample's DNS and proxy its allowed egress",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEgressGateway(cmd.Context(), cmd.OutOrStdout(), opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.Allow, "allow", nil, "allowed NAME[:PORT]")
	cmd.Flags().StringVar(&opts.AllowFile, "allow-file", "", "file of allowed NAME[:PORT], one a line, read again on SIGHUP")
	cmd.Flags().StringVar(&opts.Upstream, "upstream", "", "resolver for allowed names (ADDR[:PORT])")
	cmd.Flags().StringVar(&opts.Ports, "ports", "80,443", "ports to proxy")
	cmd.Flags().IntVar(&opts.DNSPort, "dns-port", 53, "DNS port")
	cmd.Flags().StringArrayVar(&opts.Services, "service", nil, "SERVICE=NAME[:PORT],... a service's own allowlist")
	cmd.Flags().StringArrayVar(&opts.Ceiling, "ceiling", nil, "the task's --egress: a list written to the allow file holds no more")
	cmd.Flags().StringVar(&opts.Project, "project", "", "the sample's project name (its containers are PROJECT-SERVICE-N)")
	cmd.Flags().StringArrayVar(&opts.ForwardZones, "forward-zone", nil, "a domain of the sample's own names, forwarded to --forward-to whatever the list")
	cmd.Flags().StringVar(&opts.ForwardTo, "forward-to", "", "resolver of the --forward-zone names (ADDR[:PORT])")
	cmd.Flags().StringVar(&opts.ClientService, "client-service", "", "the service every client is (instead of asking the engine's resolver)")
	return cmd
}

// allowlists are the gateway's lists: the allow file's, once SetEgress has written one, for
// every service; else --allow for services without a --service list of their own.
func allowlists(opts egressGatewayOptions) (egressgw.Allowlist, map[string]egressgw.Allowlist, error) {
	if opts.AllowFile != "" {
		b, err := os.ReadFile(opts.AllowFile)
		switch {
		case err == nil:
			a, err := egressgw.ParseAllowlist(strings.Fields(string(b)))
			if err != nil {
				return nil, nil, err
			}
			// SetEgress checks the list against the task's ceiling before writing it; the
			// gateway holds to it too, whoever wrote the file.
			ceiling, err := egressgw.ParseAllowlist(opts.Ceiling)
			return a.Bounded(ceiling), nil, err
		case !os.IsNotExist(err):
			return nil, nil, err
		}
	}
	a, err := egressgw.ParseAllowlist(opts.Allow)
	if err != nil {
		return nil, nil, err
	}
	services := map[string]egressgw.Allowlist{}
	for _, s := range opts.Services {
		name, specs, _ := strings.Cut(s, "=")
		var list []string
		if specs != "" {
			list = strings.Split(specs, ",")
		}
		if services[name], err = egressgw.ParseAllowlist(list); err != nil {
			return nil, nil, err
		}
	}
	return a, services, nil
}

func runEgressGateway(ctx context.Context, stdout io.Writer, opts egressGatewayOptions) error {
	allow, services, err := allowlists(opts)
	if err != nil {
		return usageError{err}
	}
	ports, err := egressgw.ParsePorts(opts.Ports)
	if err != nil {
		return usageError{err}
	}
	upstream := opts.Upstream
	if upstream == "" {
		return usageError{fmt.Errorf("__egress-gateway: --upstream is required")}
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		upstream = net.JoinHostPort(upstream, "53")
	}
	var listen []netip.Addr
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			listen = append(listen, p.Addr())
		}
	}
	serviceOfClient := func(ctx context.Context, client netip.Addr) string {
		return serviceOf(engineName(ctx, client), opts.Project)
	}
	if opts.ClientService != "" {
		serviceOfClient = func(context.Context, netip.Addr) string { return opts.ClientService }
	}
	forwardTo := opts.ForwardTo
	if len(opts.ForwardZones) > 0 {
		if forwardTo == "" {
			return usageError{fmt.Errorf("__egress-gateway: --forward-zone needs --forward-to")}
		}
		if _, _, err := net.SplitHostPort(forwardTo); err != nil {
			forwardTo = net.JoinHostPort(forwardTo, "53")
		}
	}
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	g := egressgw.New(egressgw.Config{
		Allow:        allow,
		Services:     services,
		Upstream:     upstream,
		Listen:       listen,
		ForwardZones: opts.ForwardZones,
		ForwardTo:    forwardTo,
		ServiceOf:    serviceOfClient,
		OnDenied: func(d egressgw.Denial) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(struct {
				Event string `json:"event"`
				egressgw.Denial
			}{egressgw.DeniedEvent, d})
		},
	})
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if a, s, err := allowlists(opts); err == nil {
					g.SetAllow(a, s)
					gen, _ := os.ReadFile(opts.AllowFile + ".generation")
					mu.Lock()
					_ = enc.Encode(struct {
						Event      string `json:"event"`
						Generation string `json:"generation"`
					}{egressgw.SetEvent, strings.TrimSpace(string(gen))})
					mu.Unlock()
				}
			}
		}
	}()
	return g.Serve(ctx, opts.DNSPort, ports)
}

// engineName asks the engine's embedded resolver who a client is: a container's reverse name
// is "<container>.<network>".
func engineName(ctx context.Context, client netip.Addr) string {
	arpa, err := dns.ReverseAddr(client.String())
	if err != nil {
		return ""
	}
	m := new(dns.Msg)
	m.SetQuestion(arpa, dns.TypePTR)
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	in, _, err := (&dns.Client{}).ExchangeContext(ctx, m, "127.0.0.11:53")
	if err != nil {
		return ""
	}
	for _, rr := range in.Answer {
		if p, ok := rr.(*dns.PTR); ok {
			name, _, _ := strings.Cut(strings.TrimSuffix(p.Ptr, "."), ".")
			return name
		}
	}
	return ""
}

// serviceOf is the service of a compose container name, PROJECT-SERVICE-N.
func serviceOf(container, project string) string {
	rest, ok := strings.CutPrefix(container, project+"-")
	if !ok || project == "" {
		return ""
	}
	if i := strings.LastIndex(rest, "-"); i > 0 {
		return rest[:i]
	}
	return rest
}

// newEgressAllowCmd reads or replaces the allow file of the gateway it runs beside, for an
// engine without a way to copy a file in and signal a container (Kubernetes execs it in the
// gateway's container): it prints the list as JSON ({"set":false} before any), or, with --set,
// writes the list and its generation and signals the gateway (PID 1) to apply them.
func newEgressAllowCmd() *cobra.Command {
	var file, generation string
	var set bool
	cmd := &cobra.Command{
		Use:    "__egress-allow [NAME[:PORT]...]",
		Short:  "Read or replace the egress gateway's allowlist",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !set {
				b, err := os.ReadFile(file)
				st := struct {
					Set   bool     `json:"set"`
					Allow []string `json:"allow"`
				}{Set: err == nil, Allow: strings.Fields(string(b))}
				if err != nil && !os.IsNotExist(err) {
					return err
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(st)
			}
			list, err := egressgw.ParseAllowlist(args)
			if err != nil {
				return usageError{err}
			}
			for _, f := range []struct{ name, body string }{
				{file + ".generation", generation + "\n"},
				{file, strings.Join(list.Strings(), "\n") + "\n"},
			} {
				if err := os.WriteFile(f.name+".tmp", []byte(f.body), 0o644); err != nil {
					return err
				}
				if err := os.Rename(f.name+".tmp", f.name); err != nil {
					return err
				}
			}
			return syscall.Kill(1, syscall.SIGHUP)
		},
	}
	cmd.Flags().StringVar(&file, "file", "/run/egress/allow", "the gateway's allow file")
	cmd.Flags().StringVar(&generation, "generation", "", "the generation the gateway logs once it applied the list")
	cmd.Flags().BoolVar(&set, "set", false, "replace the list with the arguments (none: reach nothing)")
	return cmd
}
