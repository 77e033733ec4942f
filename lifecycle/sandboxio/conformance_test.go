package sandboxio_test

import (
	"context"
	"io"
	"testing"

	"github.com/composebox/composebox/internal/conformance"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/lifecycle/sandboxio"
)

// sandbox adapts a Target to the conformance suite.
type sandbox struct{ t sandboxio.Target }

func (s sandbox) Exec(ctx context.Context, req sandboxio.ExecRequest) (sandboxio.ExecResult, error) {
	return sandboxio.Exec(ctx, s.t, req)
}

func (s sandbox) ExecStream(ctx context.Context, req sandboxio.ExecRequest) (conformance.Process, error) {
	p, err := sandboxio.ExecStream(ctx, s.t, req)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (s sandbox) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	return sandboxio.ReadFile(ctx, s.t, path, limit)
}

func (s sandbox) WriteFile(ctx context.Context, path string, data []byte) error {
	return sandboxio.WriteFile(ctx, s.t, path, data)
}

func (s sandbox) WriteFileFrom(ctx context.Context, path string, r io.Reader, size int64) error {
	return sandboxio.WriteFileFrom(ctx, s.t, path, r, size)
}

func (s sandbox) ReadFileTo(ctx context.Context, path string, w io.Writer, limit int64) (int64, error) {
	return sandboxio.ReadFileTo(ctx, s.t, path, w, limit)
}

func (s sandbox) ContainerID() string { return s.t.Container }

// newTarget starts a base-image container whose default user is user and returns its Target.
func newTarget(t testing.TB, user string) sandboxio.Target {
	t.Helper()
	c := testutil.Docker(t)
	ctr := testutil.StartContainer(t, c, testutil.ContainerOptions{User: user})
	target, err := sandboxio.TargetFor(context.Background(), c, ctr.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T, user string) conformance.Sandbox {
		return sandbox{newTarget(t, user)}
	})
}
