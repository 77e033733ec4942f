// Package egressgw is the egress gateway of a sample whose services have a domain allowlist:
// the one thing on the sample's networks with a route out. It answers the sample's DNS (a name
// not on the list gets NXDOMAIN and the query never leaves; an allowed name resolves to the
// gateway's own address), and it proxies TCP on the allowed ports by TLS SNI or HTTP Host,
// connecting only to the addresses the allowed name resolved to through the upstream resolver.
// Every refused lookup and connection is a Denial.
//
// The gateway runs as the composebox binary itself (a hidden subcommand) in an image built FROM
// scratch, so nothing is pulled.
package egressgw

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/composebox/composebox/internal/errdefs"
)

// DefaultPorts are the ports a rule without one allows.
var DefaultPorts = []int{80, 443}

// Rule is one allowed name and its ports. A name "*.example.com" matches every subdomain of
// example.com (not example.com itself).
type Rule struct {
	Name  string
	Ports []int
}

func (r Rule) String() string {
	if slices.Equal(r.Ports, DefaultPorts) {
		return r.Name
	}
	var b strings.Builder
	for i, p := range r.Ports {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%d", r.Name, p)
	}
	return b.String()
}

// ErrInvalidRule marks a NAME[:PORT] that is not one.
var ErrInvalidRule = errdefs.New(errdefs.ErrInvalidConfig, "invalid egress rule")

// ParseRule reads NAME[:PORT] ("pkgs.test", "*.example.com:8443").
func ParseRule(s string) (Rule, error) {
	name, port, hasPort := strings.Cut(strings.TrimSpace(s), ":")
	name = normalise(name)
	bad := func(why string) (Rule, error) {
		return Rule{}, errdefs.Wrap(ErrInvalidRule, nil, fmt.Sprintf("egress rule %q: %s (want NAME[:PORT], e.g. pkgs.test or *.example.com:443)", s, why))
	}
	if name == "" || strings.ContainsAny(name, " /\\@") || strings.Contains(strings.TrimPrefix(name, "*."), "*") {
		return bad("not a domain name")
	}
	r := Rule{Name: name, Ports: slices.Clone(DefaultPorts)}
	if hasPort {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return bad("port is not 1-65535")
		}
		r.Ports = []int{p}
	}
	return r, nil
}

func normalise(name string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
}

// Allowlist is the rules of a service. The zero value allows nothing.
type Allowlist []Rule

// ParseAllowlist reads rules as the flag gives them; the ports of one name are merged.
func ParseAllowlist(specs []string) (Allowlist, error) {
	var out Allowlist
	for _, s := range specs {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		out = out.add(r)
	}
	return out, nil
}

func (a Allowlist) add(r Rule) Allowlist {
	for i := range a {
		if a[i].Name == r.Name {
			for _, p := range r.Ports {
				if !slices.Contains(a[i].Ports, p) {
					a[i].Ports = append(a[i].Ports, p)
				}
			}
			slices.Sort(a[i].Ports)
			return a
		}
	}
	return append(a, r)
}

// Strings gives the rules back as NAME[:PORT] specs.
func (a Allowlist) Strings() []string {
	var out []string
	for _, r := range a {
		out = append(out, strings.Fields(r.String())...)
	}
	return out
}

func matches(pattern, name string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(name, "."+suffix)
	}
	return pattern == name
}

// AllowsName reports whether some rule names name (on any port).
func (a Allowlist) AllowsName(name string) bool {
	name = normalise(name)
	return slices.ContainsFunc(a, func(r Rule) bool { return matches(r.Name, name) })
}

// Allows reports whether name is allowed on port.
func (a Allowlist) Allows(name string, port int) bool {
	name = normalise(name)
	return slices.ContainsFunc(a, func(r Rule) bool { return matches(r.Name, name) && slices.Contains(r.Ports, port) })
}

// Ports lists every port some rule allows, sorted.
func (a Allowlist) Ports() []int {
	var out []int
	for _, r := range a {
		for _, p := range r.Ports {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Within reports the rules of a that the ceiling does not cover: a name is covered by a
// ceiling rule that matches it (a wildcard only by a wildcard at or above it) on every port.
func (a Allowlist) Within(ceiling Allowlist) []string {
	var out []string
	for _, r := range a {
		var missing []int
		for _, p := range r.Ports {
			if !slices.ContainsFunc(ceiling, func(c Rule) bool {
				return slices.Contains(c.Ports, p) && (c.Name == r.Name || (strings.HasPrefix(c.Name, "*.") && matches(c.Name, strings.TrimPrefix(r.Name, "*."))))
			}) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			// The rule as it was written when none of it is covered; else the ports that are not.
			out = append(out, strings.Fields(Rule{Name: r.Name, Ports: missing}.String())...)
		}
	}
	return out
}

// Bounded is a with every rule the ceiling does not wholly cover left out: what a list written
// to a live gateway may hold at most. An empty ceiling bounds nothing.
func (a Allowlist) Bounded(ceiling Allowlist) Allowlist {
	if len(ceiling) == 0 {
		return a
	}
	out := Allowlist{}
	for _, r := range a {
		if len(Allowlist{r}.Within(ceiling)) == 0 {
			out = append(out, r)
		}
	}
	return out
}

// Started is what a gateway was started with, read back from its arguments: each service's own
// list (--service SERVICE=NAME,...) and the task's ceiling (--ceiling).
type Started struct {
	Services map[string][]string
	Ceiling  []string
}

// StartedWith reads a gateway's arguments (see Started).
func StartedWith(args []string) Started {
	st := Started{Services: map[string][]string{}}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--service":
			name, specs, _ := strings.Cut(args[i+1], "=")
			st.Services[name] = nil
			if specs != "" {
				st.Services[name] = strings.Split(specs, ",")
			}
		case "--ceiling":
			st.Ceiling = append(st.Ceiling, args[i+1])
		}
	}
	return st
}
