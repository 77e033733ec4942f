package compose

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/composebox/composebox/internal/errdefs"
)

// What a Dockerfile makes the builder fetch. A build runs in the daemon, on the host's network
// and with the host's view of registries: an image it starts from that is not present is
// pulled from wherever its name points (127.0.0.1:PORT/img included), and ADD of a URL is
// fetched by the daemon itself, whatever build.network says. So every Dockerfile is parsed
// (with BuildKit's own parser, the one the engine uses) before it is sent, and what it would
// fetch is checked: images must be present, URLs need an opt-in and a public address.

// DockerfileSources lists what a Dockerfile would make the builder fetch.
type DockerfileSources struct {
	// Images are the images the build starts from or copies out of: FROM, COPY --from and
	// RUN --mount=from naming no earlier stage (and the same inside ONBUILD), build args
	// and ARGs expanded. FROM scratch is not one.
	Images []DockerfileImage
	// URLs are the sources of ADD that are URLs (http, https, git, ...), expanded.
	URLs []DockerfileURL
}

// DockerfileImage is an image a build needs.
type DockerfileImage struct {
	Ref string
	// Platform is FROM's --platform, expanded ("" when none).
	Platform string
	// Instruction says where it is named: "FROM", "COPY --from", "RUN --mount=from", or one
	// of those after "ONBUILD ".
	Instruction string
	Line        int
}

// DockerfileURL is a URL that ADD would make the daemon fetch.
type DockerfileURL struct {
	URL         string
	Instruction string // "ADD" or "ONBUILD ADD"
	Line        int
}

// ParseDockerfile parses a Dockerfile and lists what its build would fetch. args are the build
// args; target, when set, is the last stage built (the builder builds none after it). A
// Dockerfile that does not parse is ErrInvalidConfig naming the line.
func ParseDockerfile(data []byte, args map[string]string, target string) (DockerfileSources, error) {
	var out DockerfileSources
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return out, errdefs.Wrap(ErrInvalidConfig, err, "parse Dockerfile")
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return out, errdefs.Wrap(ErrInvalidConfig, err, "parse Dockerfile")
	}
	lex := shell.NewLex(res.EscapeToken)
	expand := func(word string, env envMap) (string, error) {
		v, _, err := lex.ProcessWord(word, env)
		return v, err
	}
	// ARGs before the first FROM: FROM may use them; a build arg overrides a default.
	meta := envMap{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if v, ok := args[kv.Key]; ok {
				meta[kv.Key] = v
			} else if kv.Value != nil {
				v, err := expand(*kv.Value, meta)
				if err != nil {
					return out, errdefs.Wrap(ErrInvalidConfig, err, fmt.Sprintf("parse Dockerfile: line %d: ARG %s", dfLine(a.Location()), kv.Key))
				}
				meta[kv.Key] = v
			}
		}
	}
	p := sourceParser{out: &out, expand: expand}
	for i, st := range stages {
		base, err := expand(st.BaseName, meta)
		if err != nil {
			return out, errdefs.Wrap(ErrInvalidConfig, err, fmt.Sprintf("parse Dockerfile: line %d: FROM %s", dfLine(st.Location), st.BaseName))
		}
		platform, err := expand(st.Platform, meta)
		if err != nil {
			return out, errdefs.Wrap(ErrInvalidConfig, err, fmt.Sprintf("parse Dockerfile: line %d: FROM --platform %s", dfLine(st.Location), st.Platform))
		}
		p.stages = stages[:i]
		if !p.isStage(base) && !strings.EqualFold(base, "scratch") {
			out.Images = append(out.Images, DockerfileImage{Ref: base, Platform: platform, Instruction: "FROM", Line: dfLine(st.Location)})
		}
		env := envMap{}
		for _, cmd := range st.Commands {
			if err := p.command(cmd, env, meta, args, ""); err != nil {
				return out, err
			}
		}
		if target != "" && strings.EqualFold(st.Name, target) {
			break
		}
	}
	return out, nil
}

// sourceParser collects a Dockerfile's sources, stage by stage.
type sourceParser struct {
	out    *DockerfileSources
	expand func(string, envMap) (string, error)
	// stages are the stages before the current one: the names COPY --from may use.
	stages []instructions.Stage
}

// isStage reports whether name is one of the earlier stages, by name or index.
func (p *sourceParser) isStage(name string) bool {
	if _, ok := instructions.HasStage(p.stages, name); ok && name != "" {
		return true
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 0 && n < len(p.stages) {
		return true
	}
	return false
}

// command records what one instruction fetches, and tracks the stage's ARG and ENV values,
// which the builder expands --from and ADD sources with. prefix is "ONBUILD " inside a trigger.
func (p *sourceParser) command(cmd instructions.Command, env, meta envMap, args map[string]string, prefix string) error {
	line := dfLine(cmd.Location())
	fail := func(err error) error {
		return errdefs.Wrap(ErrInvalidConfig, err, fmt.Sprintf("parse Dockerfile: line %d: %s%s", line, prefix, strings.ToUpper(cmd.Name())))
	}
	ex := func(word string) (string, error) { return p.expand(word, env) }
	switch c := cmd.(type) {
	case *instructions.ArgCommand:
		for _, kv := range c.Args {
			switch v, ok := args[kv.Key]; {
			case ok:
				env[kv.Key] = v
			case kv.Value != nil:
				v, err := ex(*kv.Value)
				if err != nil {
					return fail(err)
				}
				env[kv.Key] = v
			default:
				if v, ok := meta[kv.Key]; ok {
					env[kv.Key] = v
				}
			}
		}
	case *instructions.EnvCommand:
		for _, kv := range c.Env {
			v, err := ex(kv.Value)
			if err != nil {
				return fail(err)
			}
			env[kv.Key] = v
		}
	case *instructions.AddCommand:
		if err := c.Expand(ex); err != nil {
			return fail(err)
		}
		for _, src := range c.SourcePaths {
			if IsURLSource(src) {
				p.out.URLs = append(p.out.URLs, DockerfileURL{URL: src, Instruction: prefix + "ADD", Line: line})
			}
		}
	case *instructions.CopyCommand:
		from, err := ex(c.From)
		if err != nil {
			return fail(err)
		}
		if from != "" && !p.isStage(from) {
			p.out.Images = append(p.out.Images, DockerfileImage{Ref: from, Instruction: prefix + "COPY --from", Line: line})
		}
	case *instructions.RunCommand:
		if err := c.Expand(ex); err != nil {
			return fail(err)
		}
		for _, m := range instructions.GetMounts(c) {
			if m.From != "" && !p.isStage(m.From) {
				p.out.Images = append(p.out.Images, DockerfileImage{Ref: m.From, Instruction: prefix + "RUN --mount=from", Line: line})
			}
		}
	case *instructions.OnbuildCommand:
		if prefix != "" {
			return nil // the builder refuses ONBUILD ONBUILD
		}
		res, err := parser.Parse(strings.NewReader(c.Expression))
		if err != nil {
			return fail(err)
		}
		for _, n := range res.AST.Children {
			inner, err := instructions.ParseCommand(n)
			if err != nil {
				return fail(err)
			}
			// The trigger runs in another build, on its own args: check it as written.
			if err := p.command(inner, envMap{}, envMap{}, nil, "ONBUILD "); err != nil {
				return err
			}
		}
	}
	return nil
}

func dfLine(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

// envMap is the variables a Dockerfile word is expanded with.
type envMap map[string]string

func (e envMap) Get(k string) (string, bool) { v, ok := e[k]; return v, ok }
func (e envMap) Keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// IsURLSource reports whether an ADD source is fetched rather than read from the context: a
// URL of any scheme (the classic builder fetches http and https, BuildKit also git) or a git
// address such as git@host:repo.
func IsURLSource(src string) bool {
	return strings.Contains(src, "://") || strings.HasPrefix(src, "git@")
}

// Resolver looks a host name up; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckBuildSources checks the URLs a service's Dockerfile would make the daemon fetch. Without
// AllowAddURL every one is a policy violation. With it, a URL must still not lead to the host:
// its name is resolved (with r, nil for the system's resolver) and every address must be a
// public one, not loopback, link-local, private, shared or one of this host's own. The daemon
// resolves the name again when it fetches, and follows redirects: the opt-in trusts the URL's
// server not to send it back to the host.
func (p Policy) CheckBuildSources(ctx context.Context, service string, src DockerfileSources, r Resolver) error {
	var out []Violation
	for _, u := range src.URLs {
		v := Violation{Service: service, Field: "build.dockerfile", Value: fmt.Sprintf("line %d: %s %s", u.Line, u.Instruction, u.URL), Rule: "add-url"}
		if !p.AllowAddURL {
			v.Why = "ADD of a URL makes the daemon fetch it from the host's network, past the sample's network settings"
			v.OptIn = "--allow add-url"
			out = append(out, v)
			continue
		}
		if why := hostOnlyURL(ctx, u.URL, r); why != "" {
			v.Why = why
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &PolicyError{Op: fmt.Sprintf("check build of service %q", service), Violations: out}
}

// hostOnlyURL says why a URL must not be fetched by the daemon, or "" when it may be.
func hostOnlyURL(ctx context.Context, raw string, r Resolver) string {
	host := ""
	if rest, ok := strings.CutPrefix(raw, "git@"); ok {
		host, _, _ = strings.Cut(rest, ":")
	} else if u, err := url.Parse(raw); err == nil {
		host = u.Hostname()
	}
	if host == "" {
		return "the URL names no host"
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if r == nil {
			r = net.DefaultResolver
		}
		found, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil || len(found) == 0 {
			return fmt.Sprintf("its host %s does not resolve, so its address cannot be checked", host)
		}
		addrs = found
	}
	own := hostAddresses()
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case !a.IsGlobalUnicast():
			return fmt.Sprintf("its host %s is %s: a loopback, link-local, multicast or unspecified address reaches the host itself", host, a)
		case a.IsPrivate() || sharedAddressSpace.Contains(a):
			return fmt.Sprintf("its host %s is %s, a private address: the host's own networks and the sample networks", host, a)
		case slices.Contains(own, a):
			return fmt.Sprintf("its host %s is %s, one of this host's own addresses", host, a)
		}
	}
	return ""
}

// sharedAddressSpace is carrier-grade NAT space (RFC 6598), as private as RFC 1918's.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// hostAddresses are the addresses of this host's interfaces.
func hostAddresses() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}
