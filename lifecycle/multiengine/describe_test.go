package multiengine_test

import (
	"slices"
	"testing"

	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// TestFakeDescribe checks what the reaper's watchdog is told of several engines: each by its
// name and its endpoint as configured (an ssh:// endpoint kept, not the daemon host its client
// dials), so that the watchdog reaches them as the owner did.
func TestFakeDescribe(t *testing.T) {
	b, err := multiengine.New([]multiengine.EngineConfig{
		{Name: "local", Endpoint: "unix:///var/run/docker.sock"},
		{Name: "big", Endpoint: "ssh://cbx@10.0.0.5"},
	}, multiengine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	d, err := b.Describe()
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.DescribedEngine{{Name: "local", Endpoint: "unix:///var/run/docker.sock"}, {Name: "big", Endpoint: "ssh://cbx@10.0.0.5"}}
	if d.Kind != "docker" || !slices.Equal(d.Engines, want) {
		t.Errorf("description %+v, want kind docker and engines %+v", d, want)
	}

	// Members given as backends are described by their endpoints.
	f := fakebackend.New()
	t.Cleanup(func() { _ = f.Close() })
	fb, err := multiengine.NewFromBackends([]multiengine.Member{{Name: "f", Backend: f}}, multiengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := fb.Describe(); err != nil || len(d.Engines) != 1 || d.Engines[0].Name != "f" || d.Engines[0].Endpoint != f.Endpoint() {
		t.Errorf("description of a fake member: %+v, %v, want engine f at %q", d, err, f.Endpoint())
	}
}
