package compose

import (
	"fmt"

	"github.com/compose-spec/compose-go/v2/types"
)

// checkConsistency applies the rules compose itself checks when it creates the containers, which
// compose-go's loader leaves alone. composebox changes what those rules look at before the
// engine sees it (container_name becomes a network alias; start_interval is dropped for engines
// older than API 1.44), so it checks them on the project as written.
func checkConsistency(p *types.Project) []Violation {
	var out []Violation
	owner := map[string]string{} // container_name -> the first service that has it
	for _, name := range p.ServiceNames() {
		s := p.Services[name]
		if cn := s.ContainerName; cn != "" {
			if first, dup := owner[cn]; dup {
				out = append(out, Violation{Service: name, Field: "container_name", Value: cn, Rule: "container-name", Invalid: true,
					Why: fmt.Sprintf("service %q has the same container_name: two containers cannot have one name", first)})
			} else {
				owner[cn] = name
			}
		}
		if hc := s.HealthCheck; hc != nil && hc.StartInterval != nil && hc.StartPeriod == nil {
			out = append(out, Violation{Service: name, Field: "healthcheck.start_interval", Value: hc.StartInterval.String(), Rule: "healthcheck", Invalid: true,
				Why: "needs healthcheck.start_period as well: compose refuses start_interval without one"})
		}
	}
	return out
}
