package multiengine_test

import (
	"testing"

	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/internal/testutil"
	"github.com/composebox/composebox/internal/testutil/dockerd"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
	"github.com/composebox/composebox/orchestrator/backend/backendtest"
)

// TestBackend runs the harness every backend passes over one engine (the host's) and over two
// (the host's and a private one of the test's, which starts empty: the base image reaches it
// from the host's when a sample lands there).
func TestBackend(t *testing.T) {
	host := testutil.Docker(t).DaemonHost()
	t.Run("one engine", func(t *testing.T) {
		t.Parallel()
		backendtest.Run(t, backendtest.Harness{
			Prefix: "cbxbt-me1",
			New: func(t *testing.T) backend.Backend {
				return engines(t, multiengine.EngineConfig{Name: "host", Endpoint: host})
			},
		})
	})
	t.Run("two engines", func(t *testing.T) {
		t.Parallel()
		priv := testutil.PrivateDockerd(t, dockerd.Options{Prefix: "cbxbm"})
		backendtest.Run(t, backendtest.Harness{
			Prefix: "cbxbt-me2",
			New: func(t *testing.T) backend.Backend {
				// The private engine's networks share this host's routes: a pool of their own,
				// clear of the host engine's and of other tests'.
				return engines(t, multiengine.EngineConfig{Name: "host", Endpoint: host, MaxSamples: 2},
					multiengine.EngineConfig{Name: "priv", Endpoint: priv.Endpoint(), SubnetPool: "10.224.0.0/16"})
			},
		})
	})
}

// TestFakeBackend runs the harness over two fake engines, as `make test` does under -race:
// placement, routing and listings across members, without an engine.
func TestFakeBackend(t *testing.T) {
	var fs []*fakebackend.Backend
	backendtest.Run(t, backendtest.Harness{
		Prefix: "cbxbt-mefake",
		New: func(t *testing.T) backend.Backend {
			var members []multiengine.Member
			for i, name := range []string{"a", "b"} {
				f := fakebackend.New()
				f.Exits = map[string]int{backendtest.ServiceOneShot: 0, backendtest.ServiceFailing: backendtest.FailingExitCode}
				f.ExitOutput = map[string]string{backendtest.ServiceFailing: backendtest.FailingOutput + "\n"}
				fs = append(fs, f)
				// One sample at most on a: the others go to b.
				members = append(members, multiengine.Member{Name: name, Backend: f, MaxSamples: 1 - i})
			}
			b, err := multiengine.NewFromBackends(members, multiengine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		// Container ids are unique across fakes: the one that has it kills it.
		Kill: func(t *testing.T, _ backend.Backend, s backend.ServiceState) {
			for _, f := range fs {
				f.Kill(s.ContainerID, 137)
			}
		},
	})
}

// engines is a backend over the engines cfgs configure, closed at the end of the test.
func engines(t *testing.T, cfgs ...multiengine.EngineConfig) backend.Backend {
	b, err := multiengine.New(cfgs, multiengine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
