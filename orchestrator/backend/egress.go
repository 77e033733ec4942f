package backend

import (
	"context"
	"time"
)

// Egress is a backend whose samples can have an egress allowlist (see docs/security.md). It is
// optional: a backend without it refuses --egress tasks' SetEgress and Egress with
// ErrUnsupported-like errors from the orchestrator.
type Egress interface {
	// Egress reads a sample's allowlist and the attempts its gateway refused.
	Egress(ctx context.Context, project string) (EgressState, error)
	// SetEgress replaces the allowlist of every service of a live sample.
	SetEgress(ctx context.Context, project string, allow []string) error
}

// EgressChecker is an Egress backend that can still be unable to enforce a list: one of
// several engines whose member cannot. It is optional.
type EgressChecker interface {
	// EgressCheck says why a task with an allowlist cannot run here, nil when it can.
	EgressCheck() error
}

// EgressSupport says why b cannot enforce an egress allowlist, nil when it can: a task with a
// list must not run where its services would reach the whole internet.
func EgressSupport(b Engine) error {
	if _, ok := AsEgress(b); !ok {
		return &UnsupportedError{Op: "egress allowlist", Backend: b.Kind(),
			Reason: "a service has an egress allowlist (x-egress or --egress) and this backend cannot enforce one"}
	}
	if c, ok := b.(EgressChecker); ok {
		return c.EgressCheck()
	}
	return nil
}

// EgressState is a sample's allowlist and its denials.
type EgressState struct {
	// Allow is the list every service has once SetEgress set one; before that Services holds
	// each restricted service's own list.
	Allow    []string            `json:"allow,omitempty"`
	Services map[string][]string `json:"services,omitempty"`
	// Ceiling is the task's --egress the sample started with, nil when it had none: SetEgress
	// allows no more than it, whoever asks.
	Ceiling []string       `json:"ceiling,omitempty"`
	Denials []EgressDenial `json:"denials"`
}

// EgressDenial is one refused lookup or connection: the egress_denied event.
type EgressDenial struct {
	Time     time.Time `json:"time"`
	Service  string    `json:"service,omitempty"`
	Client   string    `json:"client,omitempty"`
	Name     string    `json:"name,omitempty"`
	Address  string    `json:"address,omitempty"`
	Port     int       `json:"port,omitempty"`
	Protocol string    `json:"protocol"`
	Reason   string    `json:"reason"`
}

// EgressWatcher is an Egress backend that can follow a sample's denials as they happen, which
// the orchestrator turns into egress_denied events. It is optional: without it denials are
// only read with Egress.
type EgressWatcher interface {
	// WatchEgress calls fn with each denial of the sample's gateway, from its first, until ctx
	// ends or the gateway stops (then it returns nil). A sample without a gateway is an error
	// that wraps errdefs.ErrNotFound.
	WatchEgress(ctx context.Context, project string, fn func(EgressDenial)) error
}
