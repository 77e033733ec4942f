package api

import (
	"fmt"
	"net/http"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/egressgw"
	"github.com/composebox/composebox/orchestrator"
)

// narrowEgress puts a request's egress allowlist on p: within the server's --egress when it
// has one (each name beyond it is policy_violation naming the flag), else as asked.
func (c Ceiling) narrowEgress(asked []string, p *compose.Policy, beyond func(field, value, why, flag string)) error {
	list, err := c.egressWithin("init task", "policy.egress", asked, beyond)
	if err != nil {
		return err
	}
	p.Egress = list
	return nil
}

// egressWithin parses an allowlist a request asks for and reports each name beyond the
// server's --egress, when it has one, to beyond; it returns the list in canonical form.
func (c Ceiling) egressWithin(op, field string, asked []string, beyond func(field, value, why, flag string)) ([]string, error) {
	list, err := egressgw.ParseAllowlist(asked)
	if err != nil {
		return nil, invalid(fmt.Sprintf("%s: %s: %v", op, field, err))
	}
	if len(c.Policy.Egress) > 0 {
		ceiling, err := egressgw.ParseAllowlist(c.Policy.Egress)
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s: the server's --egress: %v", op, err))
		}
		for _, name := range list.Within(ceiling) {
			beyond(field, name, "a name this server does not let tasks reach", "--egress "+name)
		}
	}
	return list.Strings(), nil
}

// EgressRequest is the body of PUT /v1/samples/{project}/egress: the allowlist (NAME[:PORT])
// every service of the sample gets, empty to close it.
type EgressRequest struct {
	Allow []string `json:"allow"`
}

// EgressState is the answer of GET and PUT /v1/samples/{project}/egress.
type EgressState struct {
	Project string `json:"project"`
	// Allow is the list every service has once it was set (empty: closed); null before, when
	// Services holds each restricted service's own list.
	Allow    []string            `json:"allow"`
	Services map[string][]string `json:"services,omitempty"`
	// Ceiling is the task's --egress the sample started with: a later allow stays within it.
	Ceiling []string `json:"ceiling,omitempty"`
	// Denials are the gateway's egress_denied records, oldest first.
	Denials []orchestrator.EgressDenial `json:"denials"`
}

func egressJSON(project string, st orchestrator.EgressState) EgressState {
	out := EgressState{Project: project, Allow: st.Allow, Services: st.Services, Ceiling: st.Ceiling, Denials: st.Denials}
	if out.Denials == nil {
		out.Denials = []orchestrator.EgressDenial{}
	}
	return out
}

func (s *Server) getEgress(w http.ResponseWriter, r *http.Request) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	st, err := e.sample.Egress(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, egressJSON(e.sample.Project(), st))
	return nil
}

// setEgress replaces the allowlist of every service of a live sample, within the server's
// --egress: a runner opens a package index for setup and closes it for the agent.
func (s *Server) setEgress(w http.ResponseWriter, r *http.Request) error {
	e, release, err := s.sample(r)
	if err != nil {
		return err
	}
	defer release()
	var req EgressRequest
	if err := decodeJSON(w, r, &req, s.opts.MaxJSONBody, false); err != nil {
		return err
	}
	op := "set egress of " + e.sample.Project()
	var out []compose.Violation
	beyond := func(field, value, why, flag string) {
		out = append(out, compose.Violation{Field: field, Value: value, Rule: ceilingRule, Why: why, OptIn: "composebox serve " + flag})
	}
	list, err := s.opts.Ceiling.egressWithin(op, "allow", req.Allow, beyond)
	if err != nil {
		return err
	}
	if len(out) > 0 {
		return &compose.PolicyError{Op: op, Violations: out}
	}
	if err := e.sample.SetEgress(r.Context(), list...); err != nil {
		return err
	}
	st, err := e.sample.Egress(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, egressJSON(e.sample.Project(), st))
	return nil
}
