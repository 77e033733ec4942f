//go:build !linux

package sandboxio

import (
	"context"
	"errors"
)

// hostKill needs Linux's /proc; elsewhere the engine runs in a VM anyway.
func hostKill(ctx context.Context, t Target, tag, execID string) error {
	return errors.New("host fallback needs linux")
}
