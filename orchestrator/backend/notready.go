package backend

import (
	"fmt"
	"strings"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
)

// NotReadyError reports a project that did not become ready: every service not ready, with
// its state, exit code, OOM flag, last probe output and log tail. It matches ErrUnavailable,
// and ErrTimeout as well when the budget ran out.
type NotReadyError struct {
	Project  string
	Reason   string // "unhealthy", "exited", "timeout", "missing"
	Waited   time.Duration
	Budget   time.Duration
	Services []ServiceState
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	switch e.Reason {
	case "timeout":
		fmt.Fprintf(&b, "wait for project %s: not ready after %s (budget %s)", e.Project, e.Waited.Round(time.Millisecond), e.Budget)
	default:
		fmt.Fprintf(&b, "wait for project %s: a service is %s after %s", e.Project, e.Reason, e.Waited.Round(time.Millisecond))
	}
	for _, s := range e.Services {
		fmt.Fprintf(&b, "\n  service %s (%s): state %s", s.Service, s.Container, s.State)
		if s.Health != "" {
			fmt.Fprintf(&b, ", health %s", s.Health)
		}
		if s.State == "exited" || s.State == "dead" {
			fmt.Fprintf(&b, ", exit code %d", s.ExitCode)
		}
		if s.OOMKilled {
			b.WriteString(", OOM-killed")
		}
		if s.HealthOutput != "" {
			fmt.Fprintf(&b, "\n    last health probe: %s", indent(strings.TrimSpace(s.HealthOutput)))
		}
		if s.Logs != "" {
			fmt.Fprintf(&b, "\n    last logs:\n      %s", indent(strings.TrimRight(s.Logs, "\n")))
		}
	}
	return b.String()
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }

func (e *NotReadyError) Is(target error) bool {
	return target == errdefs.ErrUnavailable || (target == errdefs.ErrTimeout && e.Reason == "timeout")
}
