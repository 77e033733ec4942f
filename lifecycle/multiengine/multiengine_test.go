package multiengine_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/fakebackend"
	"github.com/composebox/composebox/lifecycle/multiengine"
	"github.com/composebox/composebox/orchestrator/backend"
)

// fakes returns n fake engines named a, b, c... with the given capacities, as one backend.
func fakes(t *testing.T, max ...int) (*multiengine.Backend, []*fakebackend.Backend) {
	t.Helper()
	var members []multiengine.Member
	var fs []*fakebackend.Backend
	for i, m := range max {
		f := fakebackend.New()
		fs = append(fs, f)
		members = append(members, multiengine.Member{Name: string(rune('a' + i)), Backend: f, MaxSamples: m})
	}
	b, err := multiengine.NewFromBackends(members, multiengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b, fs
}

// project is a one-service project running image, named name, labelled as composebox labels
// a sample's services.
func project(name, image string) *types.Project {
	return &types.Project{Name: name, Services: types.Services{"default": {Name: "default", Image: image,
		CustomLabels: types.Labels{labels.LabelManaged: "true", labels.ComposeProjectLabel: name, labels.ComposeServiceLabel: "default"}}}}
}

// start places and starts a project, and fails the test on error.
func start(t *testing.T, b *multiengine.Backend, p *types.Project) backend.Placement {
	t.Helper()
	pl, err := b.Place(t.Context(), backend.PlaceRequest{Project: p})
	if err != nil {
		t.Fatalf("place %s: %v", p.Name, err)
	}
	if err := b.Up(t.Context(), p, backend.UpOptions{}); err != nil {
		t.Fatalf("up %s on %s: %v", p.Name, pl.Engine, err)
	}
	return pl
}

// startAll places and starts n projects q0, q1... running image, at once.
func startAll(t *testing.T, b *multiengine.Backend, n int, image string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			p := project(fmt.Sprintf("q%d", i), image)
			if _, err := b.Place(t.Context(), backend.PlaceRequest{Project: p}); err != nil {
				errs[i] = err
				return
			}
			errs[i] = b.Up(t.Context(), p, backend.UpOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestFakePlaceSpreadsByCapacity(t *testing.T) {
	b, fs := fakes(t, 2, 4, 6)
	for _, f := range fs {
		f.AddImage("img", nil)
	}
	counts := map[string]int{}
	first := ""
	for i := range 12 {
		pl := start(t, b, project(fmt.Sprintf("p%d", i), "img"))
		counts[pl.Engine]++
		if i == 0 {
			first = pl.Engine
		}
	}
	if counts["a"] != 2 || counts["b"] != 4 || counts["c"] != 6 {
		t.Fatalf("12 samples on capacities 2, 4, 6 went %v", counts)
	}
	_, err := b.Place(t.Context(), backend.PlaceRequest{Project: project("p12", "img")})
	var pe *backend.PlacementError
	if !errors.As(err, &pe) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("a 13th sample on full engines: %v, want a PlacementError that is ErrUnavailable", err)
	}
	if len(pe.Refusals) != 3 || !strings.Contains(err.Error(), "c: full (6 of 6 samples)") {
		t.Fatalf("refusals do not say why for each engine: %v", err)
	}
	// A sample removed frees its place.
	if _, err := b.Down(t.Context(), "p0", backend.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	if pl := start(t, b, project("p13", "img")); pl.Engine != first {
		t.Fatalf("after p0 (on %s) went, the next sample went to %s", first, pl.Engine)
	}
}

func TestFakePlaceSkipsADownEngine(t *testing.T) {
	b, fs := fakes(t, 0, 0)
	for _, f := range fs {
		f.AddImage("img", nil)
	}
	first := start(t, b, project("p0", "img"))
	if first.Engine != "a" {
		t.Fatalf("first sample on %s, want a (tie: the first given)", first.Engine)
	}
	list, err := b.Containers(t.Context(), labels.ProjectSelector("p0"), true)
	if err != nil || len(list) != 1 {
		t.Fatalf("containers of p0: %v %v", list, err)
	}
	fs[0].SetDown(true)
	// The sample on the lost engine: its calls fail as unavailable, naming the engine.
	_, err = b.Exec(t.Context(), backend.Target{Container: list[0].ID}, backend.ExecRequest{Cmd: []string{"true"}})
	if !b.Unreachable(err) || !strings.Contains(err.Error(), "engine a") {
		t.Fatalf("exec on the lost engine: %v, want an unreachable error naming engine a", err)
	}
	for i := 1; i <= 3; i++ {
		if pl := start(t, b, project(fmt.Sprintf("p%d", i), "img")); pl.Engine != "b" {
			t.Fatalf("sample %d went to %s with a down", i, pl.Engine)
		}
	}
	fs[1].SetDown(true)
	// A listing finds b gone too (as any call would): placement then refuses at once.
	if _, err := b.ListProjects(t.Context()); err == nil {
		t.Fatal("list with every engine down: no error")
	}
	_, err = b.Place(t.Context(), backend.PlaceRequest{Project: project("p9", "img")})
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "a: down") || !strings.Contains(err.Error(), "b: down") {
		t.Fatalf("placement with every engine down: %v", err)
	}
	// Listings go on without the lost engines' part, and say which are missing.
	fs[1].SetDown(false)
	projects, err := b.ListProjects(t.Context())
	if err == nil || !strings.Contains(err.Error(), "engine a") {
		t.Fatalf("list with a down: err %v, want one naming engine a", err)
	}
	if len(projects) != 3 || projects[0].Engine != "b" {
		t.Fatalf("list with a down: %+v, want b's 3 projects named after b", projects)
	}
}

func TestFakeTieGoesToTheEngineWithTheImages(t *testing.T) {
	b, fs := fakes(t, 4, 4)
	fs[1].AddImage("img", nil)
	pl := start(t, b, project("p0", "img"))
	if pl.Engine != "b" || !strings.Contains(pl.Reason, "has the sample's images") {
		t.Fatalf("placed on %s (%s), want b, the one with the image", pl.Engine, pl.Reason)
	}
	if n := fs[1].Calls("SaveImages") + fs[0].Calls("LoadImages"); n != 0 {
		t.Fatalf("%d image transfers for a sample placed where its image was", n)
	}
}

func TestFakeImagesFollowSamples(t *testing.T) {
	b, fs := fakes(t, 4, 4)
	fs[0].AddImage("only-on-a", nil)
	if pl := start(t, b, project("p0", "only-on-a")); pl.Engine != "a" {
		t.Fatalf("first sample on %s, want a: a tie goes to the image", pl.Engine)
	}
	// The next four spread over both: b gets the image from a, once.
	startAll(t, b, 4, "only-on-a")
	if got := len(fs[1].Projects()); got < 2 {
		t.Fatalf("b holds %d of 5 samples on engines of equal capacity", got)
	}
	if s, l := fs[0].Calls("SaveImages"), fs[1].Calls("LoadImages"); s != 1 || l != 1 {
		t.Fatalf("a saved %d times and b loaded %d times, want once each", s, l)
	}
	// An image no engine has is an error naming it.
	_, err := b.Place(t.Context(), backend.PlaceRequest{Project: project("r", "nowhere")})
	if err == nil {
		err = b.Up(t.Context(), project("r", "nowhere"), backend.UpOptions{})
	}
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("a sample of an image on no engine: %v, want ErrNotFound naming it", err)
	}
}

func TestFakeBuildsRunOncePerEngine(t *testing.T) {
	b, fs := fakes(t, 1, 8)
	fs[0].AddImage("base:1", nil) // what the Dockerfile starts from, on a alone
	svc := types.ServiceConfig{Name: "web", Build: &types.BuildConfig{DockerfileInline: "FROM base:1\nRUN true\n"}}
	built, err := b.Build(t.Context(), svc, backend.BuildOptions{Tag: "cbx-t-web:123"})
	if err != nil || !built {
		t.Fatalf("build at task init: %v, %v", built, err)
	}
	if fs[0].Calls("Build") != 1 || fs[1].Calls("Build") != 0 {
		t.Fatalf("builds at task init: a %d, b %d; want one on a, the first engine", fs[0].Calls("Build"), fs[1].Calls("Build"))
	}
	start(t, b, project("p0", "cbx-t-web:123")) // a, which is then full
	startAll(t, b, 3, "cbx-t-web:123")
	if fs[1].Calls("Build") != 1 {
		t.Fatalf("b ran %d builds for 3 samples, want 1", fs[1].Calls("Build"))
	}
	if fs[1].Calls("LoadImages") != 1 {
		t.Fatalf("b loaded %d archives, want 1 (the Dockerfile's base image, from a)", fs[1].Calls("LoadImages"))
	}
}

func TestFakeListingsAndRemovalSpanEngines(t *testing.T) {
	b, fs := fakes(t, 1, 1)
	for _, f := range fs {
		f.AddImage("img", nil)
	}
	start(t, b, project("p0", "img"))
	start(t, b, project("p1", "img"))
	projects, err := b.ListProjects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]string{}
	for _, p := range projects {
		engines[p.Name] = p.Engine
	}
	if engines["p0"] != "a" || engines["p1"] != "b" {
		t.Fatalf("projects listed on %v, want p0 on a and p1 on b", engines)
	}
	// A fresh backend over the same engines (another process) finds each project where it is.
	fresh, err := multiengine.NewFromBackends([]multiengine.Member{{Name: "a", Backend: fs[0]}, {Name: "b", Backend: fs[1]}}, multiengine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := fresh.Containers(t.Context(), labels.ProjectSelector("p1"), true)
	if err != nil || len(list) != 1 || list[0].Engine != "b" {
		t.Fatalf("containers of p1 from a fresh backend: %+v %v", list, err)
	}
	if res, err := fresh.Exec(t.Context(), backend.Target{Container: list[0].ID}, backend.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec in p1 from a fresh backend: %+v %v", res, err)
	}
	res, err := fresh.Sweep(t.Context(), backend.Selector{All: true}, backend.RemoveOptions{})
	if err != nil || len(res) != 2 {
		t.Fatalf("sweep all: %+v %v", res, err)
	}
	for _, f := range fs {
		if left := f.Projects(); len(left) != 0 {
			t.Fatalf("left after the sweep: %v", left)
		}
	}
}

func TestEngineConfig(t *testing.T) {
	for _, tt := range []struct {
		in, err string
	}{
		{"a=unix:///var/run/docker.sock", ""},
		{"remote=tcp://10.0.0.5:2376?tls=/etc/certs", ""},
		{"s=ssh://me@host", ""},
		{"c=context:other", ""},
		{"noequals", "want NAME=ENDPOINT"},
		{"bad name=unix:///x", "engine name"},
		{"a=http://x:1", "want unix://"},
		{"a=tcp://host", "no host:port"},
		{"a=unix:///x?tls=/d", "tcp:// only"},
		{"a=tcp://h:1?tls=/d&x=1", "unknown setting"},
	} {
		_, err := multiengine.ParseFlag(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, errdefs.ErrInvalidConfig)):
			t.Errorf("%s: %v, want an invalid_config error with %q", tt.in, err, tt.err)
		}
	}
}
