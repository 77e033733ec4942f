package api

import (
	"fmt"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/internal/egressgw"
)

// narrowEgress puts a request's egress allowlist on p: within the server's --egress when it
// has one (each name beyond it is policy_violation naming the flag), else as asked.
func (c Ceiling) narrowEgress(asked []string, p *compose.Policy, beyond func(field, value, why, flag string)) error {
	list, err := egressgw.ParseAllowlist(asked)
	if err != nil {
		return invalid(fmt.Sprintf("init task: policy.egress: %v", err))
	}
	if len(c.Policy.Egress) > 0 {
		ceiling, err := egressgw.ParseAllowlist(c.Policy.Egress)
		if err != nil {
			return invalid(fmt.Sprintf("init task: the server's --egress: %v", err))
		}
		for _, name := range list.Within(ceiling) {
			beyond("policy.egress", name, "a name this server does not let tasks reach", "--egress "+name)
		}
	}
	p.Egress = list.Strings()
	return nil
}
