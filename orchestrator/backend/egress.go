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

// EgressState is a sample's allowlist and its denials.
type EgressState struct {
	// Allow is the list every service has once SetEgress set one; before that Services holds
	// each restricted service's own list.
	Allow    []string            `json:"allow,omitempty"`
	Services map[string][]string `json:"services,omitempty"`
	Denials  []EgressDenial      `json:"denials"`
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
