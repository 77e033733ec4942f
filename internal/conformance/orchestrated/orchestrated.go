// Package orchestrated runs the conformance suite through the public API: it adapts an
// orchestrator.Sandbox, on whichever backend, to the suite's Sandbox.
package orchestrated

import (
	"bytes"
	"context"

	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/orchestrator"
)

// Sandbox adapts orchestrator.Sandbox to the conformance suite.
type Sandbox struct{ *orchestrator.Sandbox }

// ExecStream returns the process as the suite's interface (a nil *Process stays a nil interface).
func (s Sandbox) ExecStream(ctx context.Context, req orchestrator.ExecRequest) (conformance.Process, error) {
	p, err := s.Sandbox.ExecStream(ctx, req)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ReadFile reads through ReadFileTo, the streaming path a runner's file reads take.
func (s Sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := s.Sandbox.ReadFileTo(ctx, path, &buf, limit); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
