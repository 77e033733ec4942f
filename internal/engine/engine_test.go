package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
)

func TestConnectLiveDaemon(t *testing.T) {
	c, info, err := Connect(t.Context(), 0)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if info.APIVersion == "" || c.ClientVersion() != info.APIVersion {
		t.Errorf("client version %q not negotiated to server %q", c.ClientVersion(), info.APIVersion)
	}
}

func TestConnectMissingSocketFailsFast(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock")
	start := time.Now()
	_, _, err := Connect(t.Context(), 0)
	if !errors.Is(err, errdefs.ErrPrerequisite) {
		t.Fatalf("err = %v, want ErrPrerequisite", err)
	}
	if !strings.Contains(err.Error(), "make docker") || !strings.Contains(err.Error(), "/nonexistent.sock") {
		t.Errorf("error does not name the host and the fix: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %s to fail", d)
	}
}

func TestConnectBogusContextIsAnError(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CONTEXT", "composebox-no-such-context")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	_, _, err := Connect(t.Context(), 0)
	if !errors.Is(err, errdefs.ErrPrerequisite) {
		t.Fatalf("err = %v, want ErrPrerequisite", err)
	}
	if !strings.Contains(err.Error(), "composebox-no-such-context") {
		t.Errorf("error does not name the context: %v", err)
	}
}

func TestDockerAPIVersionAboveEngineIsAnError(t *testing.T) {
	t.Setenv("DOCKER_API_VERSION", "1.99")
	_, _, err := Connect(t.Context(), 0)
	if !errors.Is(err, errdefs.ErrPrerequisite) || !strings.Contains(err.Error(), "DOCKER_API_VERSION") {
		t.Fatalf("err = %v, want a prerequisite error naming DOCKER_API_VERSION", err)
	}
}
