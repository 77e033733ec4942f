package compose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/egressgw"
)

// EgressExtension is a service's own allowlist in a compose file (`x-egress: [pkgs.test]`): it
// narrows the task's --egress, never widens it.
const EgressExtension = "x-egress"

// EgressResolvedExtension holds, after ApplyDefaults, the allowlist a service ends up with
// (NAME[:PORT] specs; an empty list reaches nothing). A service without it is unrestricted.
// The engine side reads it to put the service behind the sample's egress gateway.
const EgressResolvedExtension = "x-composebox-egress"

// EgressResolverExtension is the project's upstream resolver for its egress gateway (the
// policy's EgressResolver), set by ApplyDefaults.
const EgressResolverExtension = "x-composebox-egress-resolver"

// EgressCeilingExtension is the project's egress ceiling (the policy's Egress, canonical
// NAME[:PORT] specs), set by ApplyDefaults when the task has one. The engine side records it
// with the sample, so that a later SetEgress of the live sample, by whoever asks, stays within
// what the operator allowed the task.
const EgressCeilingExtension = "x-composebox-egress-ceiling"

// EgressCeilingOf is the project's egress ceiling after ApplyDefaults, nil when the task has
// none (a service's own x-egress then only narrows it from the whole internet).
func EgressCeilingOf(p *types.Project) []string {
	switch v := p.Extensions[EgressCeilingExtension].(type) {
	case []string:
		return slices.Clone(v)
	case []any:
		var out []string
		for _, x := range v {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// EgressBeyond lists the specs of allow that ceiling does not cover, each a violation naming the
// flag that would allow it; nil when ceiling is empty (no ceiling) or covers them all.
func EgressBeyond(field string, allow, ceiling []string) ([]Violation, error) {
	list, err := egressgw.ParseAllowlist(allow)
	if err != nil {
		return nil, err
	}
	if len(ceiling) == 0 {
		return nil, nil
	}
	c, err := egressgw.ParseAllowlist(ceiling)
	if err != nil {
		return nil, err
	}
	var out []Violation
	for _, beyond := range list.Within(c) {
		out = append(out, Violation{Field: field, Value: beyond, Rule: "egress",
			Why: "reaches a name the task's egress allowlist does not", OptIn: "--egress " + beyond})
	}
	return out, nil
}

// serviceEgress reads a service's x-egress: a list of NAME[:PORT], or one as a string.
func serviceEgress(s types.ServiceConfig) ([]string, bool, error) {
	v, ok := s.Extensions[EgressExtension]
	if !ok {
		return nil, false, nil
	}
	switch v := v.(type) {
	case string:
		return []string{v}, true, nil
	case []string:
		return v, true, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			str, ok := x.(string)
			if !ok {
				return nil, true, fmt.Errorf("want a list of NAME[:PORT], got %v", x)
			}
			out = append(out, str)
		}
		return out, true, nil
	case nil:
		return nil, true, nil
	}
	return nil, true, fmt.Errorf("want a list of NAME[:PORT], got %T", v)
}

// egressViolations lists what is wrong with the task's egress: a rule that is not one, and a
// service's x-egress naming what the task's --egress does not allow.
func egressViolations(p Policy, proj *types.Project) []Violation {
	var out []Violation
	ceiling, err := egressgw.ParseAllowlist(p.Egress)
	if err != nil {
		out = append(out, Violation{Field: "egress", Why: err.Error(), Invalid: true, OptIn: "--egress NAME[:PORT]"})
	}
	for _, name := range proj.ServiceNames() {
		specs, ok, err := serviceEgress(proj.Services[name])
		if !ok {
			continue
		}
		if err != nil {
			out = append(out, Violation{Service: name, Field: EgressExtension, Why: err.Error(), Invalid: true})
			continue
		}
		list, err := egressgw.ParseAllowlist(specs)
		if err != nil {
			out = append(out, Violation{Service: name, Field: EgressExtension, Why: err.Error(), Invalid: true})
			continue
		}
		if len(p.Egress) == 0 {
			continue // no ceiling: the file only narrows what is otherwise the whole internet
		}
		for _, beyond := range list.Within(ceiling) {
			out = append(out, Violation{Service: name, Field: EgressExtension, Value: beyond, Rule: "egress",
				Why: "reaches a name the task's egress allowlist does not", OptIn: "--egress " + beyond})
		}
	}
	return out
}

// applyEgress records each service's allowlist (EgressResolvedExtension): its x-egress, else
// the task's --egress; a service with neither is left as it is. A restricted service that sits
// on the engine's default bridge moves to the project's default network, where the gateway is.
func (p Policy) applyEgress(proj *types.Project) {
	if p.EgressResolver != "" {
		proj.Extensions = withExtension(proj.Extensions, EgressResolverExtension, p.EgressResolver)
	}
	if ceiling, err := egressgw.ParseAllowlist(p.Egress); err == nil && len(ceiling) > 0 {
		proj.Extensions = withExtension(proj.Extensions, EgressCeilingExtension, ceiling.Strings())
	}
	for name, s := range proj.Services {
		specs, ok, err := serviceEgress(s)
		if err != nil {
			specs, ok = nil, true // refused by the check; reach nothing rather than everything
		}
		if !ok {
			if len(p.Egress) == 0 {
				continue
			}
			specs = p.Egress
		}
		list, err := egressgw.ParseAllowlist(specs)
		if err != nil {
			list = nil
		}
		s.Extensions = withExtension(s.Extensions, EgressResolvedExtension, list.Strings())
		switch mode := strings.ToLower(s.NetworkMode); {
		case mode == "bridge" || mode == "default" || (mode == "" && len(s.Networks) == 0):
			s.NetworkMode = ""
			s.Networks = map[string]*types.ServiceNetworkConfig{"default": nil}
			if _, ok := proj.Networks["default"]; !ok {
				if proj.Networks == nil {
					proj.Networks = types.Networks{}
				}
				proj.Networks["default"] = types.NetworkConfig{Name: proj.Name + "_default"}
			}
		}
		proj.Services[name] = s
	}
}

// EgressOf is a service's allowlist after ApplyDefaults, and whether it has one.
func EgressOf(s types.ServiceConfig) ([]string, bool) {
	switch v := s.Extensions[EgressResolvedExtension].(type) {
	case []string:
		return slices.Clone(v), true
	case []any:
		var out []string
		for _, x := range v {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out, true
	}
	return nil, false
}
