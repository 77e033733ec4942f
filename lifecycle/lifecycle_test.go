package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup"
	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/testutil"
)

func smokeProject(t *testing.T, name, base string, svcs map[string]types.ServiceConfig) *types.Project {
	p := &types.Project{Name: name, WorkingDir: t.TempDir(), Services: types.Services{}}
	init := true
	grace := types.Duration(time.Second)
	for n, s := range svcs {
		s.Name = n
		if s.Image == "" {
			s.Image = base
		}
		s.Init = &init
		s.StopGracePeriod = &grace
		s.CustomLabels = map[string]string{
			labels.ComposeProjectLabel: name, labels.ComposeServiceLabel: n,
			labels.ComposeVersionLabel: labels.ComposeVersion, labels.ComposeOneoffLabel: "False",
			labels.ComposeWorkingDirLabel: p.WorkingDir, labels.ComposeConfigFilesLabel: "",
		}
		for k, v := range testutil.Labels(t) {
			s.CustomLabels[k] = v
		}
		p.Services[n] = s
	}
	p.Networks = types.Networks{"default": {Name: name + "_default", Labels: testutil.Labels(t)}}
	for n, s := range p.Services {
		s.Networks = map[string]*types.ServiceNetworkConfig{"default": nil}
		p.Services[n] = s
	}
	return p
}

func TestSmokeUpWaitDown(t *testing.T) {
	c := testutil.Docker(t)
	base := testutil.BaseImage(t)
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cbx-smoke-%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { _, _ = e.Down(context.Background(), name, DownOptions{}) })
	hc := &types.HealthCheckConfig{Test: []string{"CMD", "true"}, Interval: ptr(types.Duration(200 * time.Millisecond)), Retries: ptr(uint64(3))}
	p := smokeProject(t, name, base, map[string]types.ServiceConfig{
		"default": {Command: []string{"tail", "-f", "/dev/null"}, HealthCheck: hc},
		"bad":     {Command: []string{"sh", "-c", "echo dying; exit 3"}},
	})
	start := time.Now()
	if err := e.Up(t.Context(), p, UpOptions{}); err != nil {
		t.Fatalf("up: %v\ncompose said: %s", err, e.Output())
	}
	t.Logf("up took %s", time.Since(start))
	states, err := e.Wait(t.Context(), p, WaitOptions{})
	t.Logf("wait err: %v", err)
	var nr *NotReadyError
	if !errors.As(err, &nr) || !errors.Is(err, errdefs.ErrUnavailable) || nr.Reason != "exited" {
		t.Fatalf("wait = %v, states %+v", err, states)
	}
	removed, err := e.Down(t.Context(), name, DownOptions{})
	if err != nil || removed.Containers != 2 || removed.Networks != 1 {
		t.Fatalf("down = %+v, %v", removed, err)
	}
	again, err := e.Down(t.Context(), name, DownOptions{})
	if err != nil || again != (cleanup.Removed{}) {
		t.Fatalf("second down = %+v, %v", again, err)
	}
}

func ptr[T any](v T) *T { return &v }
