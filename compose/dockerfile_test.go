package compose

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
)

func TestParseDockerfileFindsWhatTheBuildFetches(t *testing.T) {
	cases := []struct {
		name       string
		dockerfile string
		args       map[string]string
		target     string
		images     []string // "INSTRUCTION ref"
		urls       []string
	}{
		{"scratch fetches nothing", "FROM scratch\nCOPY a /a\n", nil, "", nil, nil},
		{"plain FROM", "FROM busybox:1\nRUN true\n", nil, "", []string{"FROM busybox:1"}, nil},
		{"a registry on loopback", "FROM 127.0.0.1:5000/evil/img:1\n", nil, "", []string{"FROM 127.0.0.1:5000/evil/img:1"}, nil},
		{"stages are not images", "FROM base:1 AS build\nRUN make\nfrom BUILD\nCOPY --from=build /a /a\nCOPY --from=0 /b /b\n", nil, "",
			[]string{"FROM base:1"}, nil},
		{"a stage named later is an image", "FROM a:1\nCOPY --from=later /x /x\nFROM b:1 AS later\n", nil, "",
			[]string{"FROM a:1", "COPY --from later", "FROM b:1"}, nil},
		{"build args expand FROM", "ARG BASE=default:1\nARG REG\nFROM ${REG}${BASE}\n", map[string]string{"REG": "10.0.0.1:5000/"}, "",
			[]string{"FROM 10.0.0.1:5000/default:1"}, nil},
		{"ARG defaults chain", "ARG R=127.0.0.1:9\nARG IMG=$R/x\nFROM $IMG\n", nil, "", []string{"FROM 127.0.0.1:9/x"}, nil},
		{"COPY --from an image, expanded in the stage", "FROM scratch\nARG SRC=evil:2\nCOPY --from=$SRC /x /x\n", nil, "",
			[]string{"COPY --from evil:2"}, nil},
		{"RUN --mount=from", "FROM scratch AS s\nFROM scratch\nRUN --mount=type=bind,from=other:3,target=/m true\nRUN --mount=type=bind,from=s,target=/n true\n", nil, "",
			[]string{"RUN --mount=from other:3"}, nil},
		{"ADD of URLs", "FROM scratch\nADD http://127.0.0.1:18777/secret.txt /loot\nADD local.txt /l\nARG H=10.1.1.1\nADD https://${H}/x git@github.com:a/b.git /d/\n", nil, "",
			nil, []string{"ADD http://127.0.0.1:18777/secret.txt", "ADD https://10.1.1.1/x", "ADD git@github.com:a/b.git"}},
		{"heredocs are not URLs", "FROM scratch\nADD <<EOF /x\nhttp://127.0.0.1/\nEOF\n", nil, "", nil, nil},
		{"ONBUILD triggers", "FROM scratch\nONBUILD ADD http://169.254.169.254/latest /m\nONBUILD COPY --from=trigger:1 /a /a\n", nil, "",
			[]string{"ONBUILD COPY --from trigger:1"}, []string{"ONBUILD ADD http://169.254.169.254/latest"}},
		{"target stops the stages", "FROM a:1 AS one\nFROM b:1 AS two\n", nil, "ONE", []string{"FROM a:1"}, nil},
		{"platform is kept", "ARG P=linux/arm64\nFROM --platform=$P c:1\n", nil, "", []string{"FROM c:1"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := ParseDockerfile([]byte(tc.dockerfile), tc.args, tc.target)
			if err != nil {
				t.Fatal(err)
			}
			var images, urls []string
			for _, im := range src.Images {
				if im.Line == 0 {
					t.Errorf("image %s has no line", im.Ref)
				}
				images = append(images, im.Instruction+" "+im.Ref)
			}
			for _, u := range src.URLs {
				urls = append(urls, u.Instruction+" "+u.URL)
			}
			if !slices.Equal(images, tc.images) || !slices.Equal(urls, tc.urls) {
				t.Errorf("images %q, urls %q; want %q, %q", images, urls, tc.images, tc.urls)
			}
		})
	}
	src, _ := ParseDockerfile([]byte("ARG P=linux/arm64\nFROM --platform=$P c:1\n"), nil, "")
	if src.Images[0].Platform != "linux/arm64" {
		t.Errorf("platform %q, want linux/arm64", src.Images[0].Platform)
	}
}

func TestParseDockerfileRefusesWhatDoesNotParse(t *testing.T) {
	for _, df := range []string{"RUN true\n", "FROM\n", "FROM a\nCOPY --from\n", "FROM scratch\nFOO bar\n"} {
		_, err := ParseDockerfile([]byte(df), nil, "")
		if !errors.Is(err, errdefs.ErrInvalidConfig) {
			t.Errorf("%q: err = %v, want ErrInvalidConfig", df, err)
		}
	}
}

// fakeResolver answers every name with fixed addresses.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestCheckBuildSourcesNeedsTheOptInAndAPublicHost(t *testing.T) {
	urls := func(u ...string) DockerfileSources {
		var s DockerfileSources
		for _, x := range u {
			s.URLs = append(s.URLs, DockerfileURL{URL: x, Instruction: "ADD", Line: 3})
		}
		return s
	}
	ctx := t.Context()
	err := Policy{}.CheckBuildSources(ctx, "web", urls("https://example.com/x"), nil)
	var pe *PolicyError
	if !errors.As(err, &pe) || !errors.Is(err, errdefs.ErrPolicyViolation) || pe.Violations[0].OptIn != "--allow add-url" ||
		!strings.Contains(err.Error(), "line 3: ADD https://example.com/x") {
		t.Fatalf("without the opt-in: %v", err)
	}
	r := fakeResolver{
		"localhost":    {netip.MustParseAddr("127.0.0.1")},
		"rebound.test": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.7")},
		"public.test":  {netip.MustParseAddr("93.184.216.34")},
	}
	allowed := Policy{AllowAddURL: true}
	for _, u := range []string{
		"http://127.0.0.1:18777/secret.txt", "http://localhost/x", "http://[::1]/x", "http://[::ffff:127.0.0.1]/x",
		"http://169.254.169.254/latest/meta-data", "http://10.0.0.1/x", "http://172.17.0.1/x", "http://192.168.1.1/x",
		"http://100.64.0.1/x", "http://0.0.0.0/x", "http://rebound.test/x", "http://unknown.test/x", "git@localhost:a/b.git",
		"http:///nohost",
	} {
		err := allowed.CheckBuildSources(ctx, "web", urls(u), r)
		if !errors.Is(err, errdefs.ErrPolicyViolation) {
			t.Errorf("%s with the opt-in: err = %v, want a policy violation", u, err)
		}
	}
	for _, a := range hostAddresses() {
		if a.IsGlobalUnicast() && !a.IsPrivate() {
			u := "http://" + netip.AddrPortFrom(a, 80).String() + "/x"
			if err := allowed.CheckBuildSources(ctx, "web", urls(u), r); !errors.Is(err, errdefs.ErrPolicyViolation) {
				t.Errorf("%s (this host's own address): err = %v, want a policy violation", u, err)
			}
		}
	}
	if err := allowed.CheckBuildSources(ctx, "web", urls("https://public.test/f.tgz", "http://93.184.216.34/x"), r); err != nil {
		t.Errorf("public URLs with the opt-in: %v", err)
	}
}

// Planning a large build context stops as soon as its ctx is cancelled.
func TestPlanImagesStopsOnCancel(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 << 30); err != nil { // sparse: costs no disk, takes seconds to hash
		t.Fatal(err)
	}
	f.Close()
	proj := &types.Project{Name: "p", WorkingDir: dir, Services: types.Services{"default": {Name: "default", Build: &types.BuildConfig{Context: dir, Dockerfile: "Dockerfile"}}}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := PlanImagesContext(ctx, proj, "t", PlanOptions{}); done <- err }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("planning did not stop within 2s of its ctx being cancelled")
	}
}

// The task's files are refused by type and place before they are read, each with a typed error.
func TestReadTaskFileRefusesWhatIsNotARegularFileInside(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "ok"), "hello")
	write(filepath.Join(root, "big"), strings.Repeat("x", 100))
	write(filepath.Join(outside, "secret"), "s3cret")
	for _, l := range [][2]string{{filepath.Join(outside, "secret"), "out"}, {"/dev/urandom", "rand"}, {"/nonexistent", "dangling"}} {
		if err := os.Symlink(l[0], filepath.Join(root, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots := []string{ResolvePath(root)}
	if data, err := ReadTaskFile(filepath.Join(root, "ok"), roots, 10); err != nil || string(data) != "hello" {
		t.Fatalf("ok: %q, %v", data, err)
	}
	for name, want := range map[string]error{"big": ErrInvalidConfig, "out": ErrPolicyViolation, "rand": ErrPolicyViolation, "fifo": ErrInvalidConfig, "dangling": fs.ErrNotExist} {
		data, err := ReadTaskFile(filepath.Join(root, name), roots, 10)
		if !errors.Is(err, want) || data != nil || (err != nil && strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("%s: %q, %v; want %v", name, data, err, want)
		}
	}
	// Without roots, a device is still refused by its type.
	if _, err := ReadTaskFile(filepath.Join(root, "rand"), nil, 10); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "character device") {
		t.Errorf("rand without roots: %v", err)
	}
}
