package backend_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/orchestrator/backend"
)

// The required contract is what docs/design.md counts; a method added to it is a method every
// backend must grow, which that page must say.
func TestBackendRequiresTwentyOneMethods(t *testing.T) {
	if n := reflect.TypeFor[backend.Backend]().NumMethod(); n != 21 {
		t.Errorf("backend.Backend has %d methods, docs/design.md says 21", n)
	}
}

// bare implements the required contract only, and of it only what the helpers below reach:
// the rest panics through the nil embedded Backend.
type bare struct {
	backend.Backend
	files    map[string][]byte
	projects []backend.Project
}

func (b *bare) Kind() string { return "bare" }

func (b *bare) Ping(context.Context, time.Duration) (backend.Info, error) {
	return backend.Info{Endpoint: "mem://"}, nil
}

func (b *bare) ReadFileTo(_ context.Context, _ backend.Target, p string, w io.Writer, _ int64) (int64, error) {
	data, ok := b.files[p]
	if !ok {
		return 0, errdefs.New(errdefs.ErrNotFound, "read "+p+": no such file")
	}
	n, err := w.Write(data)
	return int64(n), err
}

func (b *bare) WriteFileFrom(_ context.Context, _ backend.Target, p string, r io.Reader, _ int64) error {
	data, err := io.ReadAll(r)
	b.files[p] = data
	return err
}

func (b *bare) Inspect(_ context.Context, c string) (backend.ContainerInfo, error) {
	return backend.ContainerInfo{}, errdefs.New(errdefs.ErrNotFound, "inspect "+c+": no such container")
}

func (b *bare) ListProjects(context.Context) ([]backend.Project, error) { return b.projects, nil }

func TestABareBackendHasNoOptionalVerb(t *testing.T) {
	b := &bare{}
	if _, ok := backend.AsPooler(b); ok {
		t.Error("AsPooler: a bare backend is a Pooler")
	}
	if _, ok := backend.AsForker(b); ok {
		t.Error("AsForker: a bare backend is a Forker")
	}
	if c := backend.CapabilitiesOf(b); c != (backend.Capabilities{}) {
		t.Errorf("CapabilitiesOf: %+v, want none", c)
	}
	if backend.Transient(b, errors.New("x")) || backend.Unreachable(b, errors.New("x")) {
		t.Error("an error of a backend that does not classify them is transient or unreachable")
	}
	if n := backend.EngineName(b); n != "" {
		t.Errorf("EngineName: %q, want none", n)
	}
	err := backend.Lacks("prewarm t", b, "backend.Pooler")
	var ue *backend.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Lacks: %v is not an UnsupportedError", err)
	}
	if !strings.HasPrefix(err.Error(), "prewarm t: ") || !strings.Contains(err.Error(), "bare backend") {
		t.Errorf("Lacks: %q names neither the verb first nor the backend", err)
	}
}

// The helpers with a natural fallback do on the required contract what the optional verb does.
func TestHelpersFallBackOnTheRequiredContract(t *testing.T) {
	ctx := t.Context()
	b := &bare{files: map[string][]byte{}, projects: []backend.Project{
		{Name: "p1", Task: "t", Owner: "me"},
		{Name: "p2", Task: "t", Owner: "me", Status: backend.StatusDetached},
		{Name: "p3", Task: "u", Owner: "me"},
		{Name: "p4", Task: "t", Owner: "other"},
	}}
	tg := backend.Target{Container: "c"}
	if err := backend.WriteFile(ctx, b, tg, "/f", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if got, err := backend.ReadFile(ctx, b, tg, "/f", 0); err != nil || !bytes.Equal(got, []byte("data")) {
		t.Errorf("ReadFile: %q, %v; want data", got, err)
	}
	if _, err := backend.ReadFile(ctx, b, tg, "/none", 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("ReadFile of a missing file: %v, want ErrNotFound", err)
	}
	owned, err := backend.OwnedProjects(ctx, b, "t", "me")
	if err != nil || !slices.Equal(owned, []string{"p1"}) {
		t.Errorf("OwnedProjects: %v, %v; want [p1]", owned, err)
	}
	d, err := backend.Diagnose(ctx, b, tg)
	if err != nil || !d.Missing {
		t.Errorf("Diagnose of a removed container: %+v, %v; want Missing", d, err)
	}
	r := backend.RunDoctor(ctx, b, backend.DoctorOptions{Extra: []backend.Check{{Name: "policy", Status: backend.Fail}}})
	if r.OK || len(r.Checks) != 2 || r.Checks[0].Status != backend.Pass {
		t.Errorf("RunDoctor: %+v; want the engine passing, then the failing extra check", r)
	}
}
