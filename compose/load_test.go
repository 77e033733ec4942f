package compose

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sirupsen/logrus"

	"github.com/composebox/composebox/internal/images/imagespec"
)

// loadDir resolves and loads dir (or a file in it) with opts.
func loadDir(t *testing.T, path string, opts LoadOptions) (*types.Project, error) {
	t.Helper()
	r, err := Resolve(path, ResolveOptions{})
	if err != nil {
		return nil, err
	}
	return Load(t.Context(), r, opts)
}

func mustLoad(t *testing.T, path string, opts LoadOptions) *types.Project {
	t.Helper()
	p, err := loadDir(t, path, opts)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return p
}

func env(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return "<unset>"
}

// Interpolation reads the task's .env, PassEnv (names taken from the process environment one by
// one) and Environment, in that order of precedence, and nothing else of the process environment.
func TestLoadEnvironmentPrecedence(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"compose.yaml": `services:
  default:
    image: busybox
    environment:
      A: ${A}
      B: ${B}
      C: ${C}
      D: ${D:-fallback}
      E: $${LITERAL}
      F: ${F-unset}
`,
		".env": "A=dotenv\nB=dotenv\nC=dotenv\n",
	})
	t.Setenv("A", "os")
	t.Setenv("B", "os")
	t.Setenv("C", "os")
	t.Setenv("F", "os")
	p := mustLoad(t, dir, LoadOptions{Environment: map[string]string{"A": "override"}, PassEnv: []string{"A", "B"}})
	s := p.Services["default"]
	for k, want := range map[string]string{"A": "override", "B": "os", "C": "dotenv", "D": "fallback", "E": "${LITERAL}", "F": "unset"} {
		if got := env(s, k); got != want {
			t.Errorf("environment %s = %q, want %q", k, got, want)
		}
	}
	if _, err := loadDir(t, dir, LoadOptions{PassEnv: []string{"NOT A NAME"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("PassEnv of a bad name: %v", err)
	}
}

func TestLoadDisableEnvFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"compose.yaml": "services:\n  default:\n    image: busybox\n    environment:\n      X: ${X:-none}\n",
		".env":         "X=dotenv\n",
	})
	p := mustLoad(t, dir, LoadOptions{Environment: map[string]string{"COMPOSE_DISABLE_ENV_FILE": "true"}})
	if got := env(p.Services["default"], "X"); got != "none" {
		t.Errorf("X = %q with the .env file disabled, want none", got)
	}
}

// An unset variable without a default is blank, as in compose, with one warning for each through
// the logger: where it is used and the flags that set it. The process environment is not read
// for it. A bare name in environment: passes only a value that is set.
func TestLoadUnsetVariable(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"compose.yaml": "services:\n  default:\n    image: ${CBX_REGISTRY}busybox\n    environment:\n      X: ${CBX_TEST_SURELY_UNSET}\n      Y: $CBX_OTHER\n      HOME:\n" +
			"      Z: ${CBX_TEST_SURELY_UNSET}\n",
	})
	t.Setenv("CBX_TEST_SURELY_UNSET", "from the process")
	t.Setenv("HOME", "/home/runner")
	var logged bytes.Buffer
	p := mustLoad(t, dir, LoadOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	s := p.Services["default"]
	if s.Image != "busybox" || env(s, "X") != "" || env(s, "Y") != "" || env(s, "Z") != "" {
		t.Errorf("image %q, X %q, Y %q, Z %q: want the unset variables blank", s.Image, env(s, "X"), env(s, "Y"), env(s, "Z"))
	}
	if got := env(s, "HOME"); got != "<unset>" {
		t.Errorf("HOME = %q: a bare name took the process environment", got)
	}
	if got, want := UnsetVariables(p), []string{"CBX_OTHER", "CBX_REGISTRY", "CBX_TEST_SURELY_UNSET"}; !slices.Equal(got, want) {
		t.Errorf("UnsetVariables = %v, want %v", got, want)
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d warnings, want one per variable:\n%s", len(lines), logged.String())
	}
	for i, want := range [][]string{
		{"level=WARN", "variable=CBX_OTHER", "compose.yaml line=6", `set_with="--var CBX_OTHER=VALUE, --env-file FILE or --pass-env CBX_OTHER"`},
		{"variable=CBX_REGISTRY", "compose.yaml line=3"},
		{"variable=CBX_TEST_SURELY_UNSET", "compose.yaml line=5", "--pass-env CBX_TEST_SURELY_UNSET"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("warning %q does not say %q", lines[i], w)
			}
		}
	}
	// Quiet for a load of files already warned about, and still listed.
	logged.Reset()
	p = mustLoad(t, dir, LoadOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil)), QuietUnset: true})
	if logged.Len() != 0 || len(UnsetVariables(p)) != 3 {
		t.Errorf("QuietUnset: logged %q, UnsetVariables %v", logged.String(), UnsetVariables(p))
	}
	p = mustLoad(t, dir, LoadOptions{Environment: map[string]string{"CBX_REGISTRY": "", "CBX_OTHER": "o", "CBX_TEST_SURELY_UNSET": "x"}})
	if got := UnsetVariables(p); got != nil {
		t.Errorf("UnsetVariables = %v with every variable given (one empty)", got)
	}
	// When the blank value makes the file fail to load, the error names the variable too.
	_, err := Load(t.Context(), FromYAML([]byte("services:\n  default:\n    image: ${CBX_IMAGE}\n"), t.TempDir()), LoadOptions{})
	checkInvalid(t, err, "${CBX_IMAGE}: is not set and was left blank (inline compose YAML line 3)", "--var CBX_IMAGE=VALUE",
		"neither an image nor a build context")
}

// compose-go warns about an unset variable on logrus, from its nested substitutions too (a
// default's text, what follows a default in the same braces), and a library must not print.
// Only the logger hears of it, once per variable. ${VAR:?message} still fails with the message.
func TestLoadUnsetVariableNotOnLogrus(t *testing.T) {
	var lr bytes.Buffer
	out, level := logrus.StandardLogger().Out, logrus.GetLevel()
	logrus.SetOutput(&lr)
	logrus.SetLevel(logrus.WarnLevel)
	t.Cleanup(func() { logrus.SetOutput(out); logrus.SetLevel(level) })
	yml := "services:\n  default:\n    image: busybox\n    environment:\n" +
		"      A: \"${CBX_A:-${CBX_NESTED}}\"\n" + // a default's text
		"      B: \"${CBX_B:-x}/${CBX_AFTER}\"\n" + // after a default, in the same match
		"      C: \"${CBX_C:+alt}${CBX_D-d}$${CBX_LITERAL}\"\n" +
		"      D: \"${CBX_SET:?never}${CBX_SET:+y}\"\n"
	var logged bytes.Buffer
	p, err := Load(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{
		Environment: map[string]string{"CBX_SET": "s"}, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Services["default"]
	for k, want := range map[string]string{"A": "", "B": "x/", "C": "d${CBX_LITERAL}", "D": "sy"} {
		if got := env(s, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got, want := UnsetVariables(p), []string{"CBX_AFTER", "CBX_NESTED"}; !slices.Equal(got, want) {
		t.Errorf("UnsetVariables = %v, want %v", got, want)
	}
	if n := strings.Count(logged.String(), "level=WARN"); n != 2 {
		t.Errorf("%d warnings on the logger, want 2:\n%s", n, logged.String())
	}
	if lr.Len() > 0 {
		t.Errorf("logrus printed:\n%s", lr.String())
	}
	_, err = Load(t.Context(), FromYAML([]byte("services:\n  default:\n    image: \"${CBX_REG:?set the registry with -e CBX_REG=...}busybox\"\n"), t.TempDir()), LoadOptions{})
	checkInvalid(t, err, "required variable CBX_REG is missing a value: set the registry with -e CBX_REG=...")
	if lr.Len() > 0 {
		t.Errorf("logrus printed:\n%s", lr.String())
	}
}

func TestLoadProfiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"compose.yaml": `services:
  default:
    image: busybox
  debug:
    image: busybox
    profiles: [debug]
`,
	})
	tests := []struct {
		name string
		opts LoadOptions
		want bool
	}{
		{"no profile", LoadOptions{}, false},
		{"profile given", LoadOptions{Profiles: []string{"debug"}}, true},
		{"COMPOSE_PROFILES", LoadOptions{Environment: map[string]string{"COMPOSE_PROFILES": "other, debug"}}, true},
		{"given wins over COMPOSE_PROFILES", LoadOptions{Profiles: []string{"other"}, Environment: map[string]string{"COMPOSE_PROFILES": "debug"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, dir, tt.opts)
			if _, got := p.Services["debug"]; got != tt.want {
				t.Errorf("service debug enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadExtendsAndMultipleFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"common/base.yaml": `services:
  base:
    image: busybox
    environment:
      FROM_BASE: "1"
      OVERRIDDEN: base
`,
		"compose.yaml": `services:
  default:
    extends:
      file: common/base.yaml
      service: base
    environment:
      OVERRIDDEN: main
  web:
    image: busybox
`,
		"override.yaml": `services:
  web:
    image: busybox:override
`,
	})
	r, err := Resolve(dir, ResolveOptions{ExtraFiles: []string{filepath.Join(dir, "override.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(t.Context(), r, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.Services["default"]
	if env(s, "FROM_BASE") != "1" || env(s, "OVERRIDDEN") != "main" || s.Image != "busybox" {
		t.Errorf("extends: default = image %q env %v", s.Image, s.Environment)
	}
	if got := p.Services["web"].Image; got != "busybox:override" {
		t.Errorf("web image = %q, want the override file's", got)
	}
	if len(p.ComposeFiles) != 2 || p.ComposeFiles[1] != filepath.Join(dir, "override.yaml") {
		t.Errorf("ComposeFiles = %v", p.ComposeFiles)
	}
}

func TestLoadMetadataOnlyWhenReferenced(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"compose.yaml": `services:
  default:
    image: busybox
    environment:
      LEVEL: ${SAMPLE_METADATA_DIFFICULTY_LEVEL}
      FLAG: ${SAMPLE_METADATA_FLAG_X:-none}
  other:
    image: busybox
    environment: [SAMPLE_METADATA_BARE]
    x-default: false
`,
	})
	meta := map[string]string{
		"difficulty level": "hard",   // referenced
		"flag":             "secret", // SAMPLE_METADATA_FLAG is a prefix of a referenced name only
		"bare":             "yes",    // referenced without interpolation
		"unused":           "no",
	}
	p := mustLoad(t, dir, LoadOptions{Metadata: meta})
	if got := env(p.Services["default"], "LEVEL"); got != "hard" {
		t.Errorf("LEVEL = %q, want hard", got)
	}
	if got := env(p.Services["default"], "FLAG"); got != "none" {
		t.Errorf("FLAG = %q, want none", got)
	}
	if got := env(p.Services["other"], "SAMPLE_METADATA_BARE"); got != "yes" {
		t.Errorf("SAMPLE_METADATA_BARE = %q, want yes", got)
	}
	for _, k := range []string{"SAMPLE_METADATA_UNUSED", "SAMPLE_METADATA_FLAG"} {
		if _, ok := p.Environment[k]; ok {
			t.Errorf("project environment has %s, which no file references", k)
		}
	}
}

func TestMetadataVar(t *testing.T) {
	for key, want := range map[string]string{
		"level": "SAMPLE_METADATA_LEVEL", "difficulty level": "SAMPLE_METADATA_DIFFICULTY_LEVEL",
		"a-b.c": "SAMPLE_METADATA_A_B_C", "x_1": "SAMPLE_METADATA_X_1",
	} {
		if got := MetadataVar(key); got != want {
			t.Errorf("MetadataVar(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestLoadBaseImageEnv(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: ${COMPOSEBOX_BASE_IMAGE}\n"})
	t.Setenv(BaseImageEnv, "from-the-process:1") // never read
	want, err := imagespec.BaseRef(imagespec.DefaultBusybox)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, dir, LoadOptions{}).Services["default"].Image; got != want {
		t.Errorf("image = %q, want the base image %q", got, want)
	}
	got := mustLoad(t, dir, LoadOptions{Environment: map[string]string{BaseImageEnv: "mine:1"}}).Services["default"].Image
	if got != "mine:1" {
		t.Errorf("image = %q, want the environment's mine:1", got)
	}
}

// Per-sample variables are set only when referenced, and the project says which it references,
// so that a task loads again for each sample only when it must.
func TestLoadSampleVariables(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    environment: {P: \"${COMPOSE_PROJECT_NAME}\", T: \"${T_BENCH_X}\", L: \"${SAMPLE_METADATA_LEVEL}\"}\n"})
	p := mustLoad(t, dir, LoadOptions{Name: "cbx-t-1", SampleEnv: map[string]string{"T_BENCH_X": "x1", "T_BENCH_Y": "y1"}})
	s := p.Services["default"]
	if env(s, "P") != "cbx-t-1" || env(s, "T") != "x1" || env(s, "L") != "" {
		t.Errorf("environment %v", s.Environment)
	}
	if got := strings.Join(SampleVariables(p), ","); got != "COMPOSE_PROJECT_NAME,SAMPLE_METADATA_LEVEL,T_BENCH_X" {
		t.Errorf("SampleVariables = %q", got)
	}
	if _, ok := p.Environment["T_BENCH_Y"]; ok {
		t.Error("an unreferenced per-sample variable was set")
	}
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n"})
	if got := SampleVariables(mustLoad(t, dir, LoadOptions{SampleEnv: map[string]string{"T_BENCH_X": "x"}})); got != nil {
		t.Errorf("SampleVariables = %v for a file that references none", got)
	}
}

// A project is poolable unless its files reference per-sample variables; the reason names them.
func TestPoolable(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n    environment: {P: \"${COMPOSE_PROJECT_NAME}\", L: \"${SAMPLE_METADATA_LEVEL}\"}\n"})
	ok, why := Poolable(mustLoad(t, dir, LoadOptions{Name: "cbx-t-1"}))
	want := "its files reference per-sample variables (COMPOSE_PROJECT_NAME, SAMPLE_METADATA_LEVEL): each sample is loaded with its own values"
	if ok || why != want {
		t.Errorf("Poolable = %v, %q; want false, %q", ok, why, want)
	}
	writeFiles(t, dir, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n"})
	if ok, why := Poolable(mustLoad(t, dir, LoadOptions{})); !ok || why != "" {
		t.Errorf("Poolable = %v, %q for a file that references no per-sample variable; want true, \"\"", ok, why)
	}
}

func TestLoadGenerated(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"app.Dockerfile": "FROM scratch\n", "sub/": ""})
	t.Run("dockerfile", func(t *testing.T) {
		p := mustLoad(t, filepath.Join(dir, "app.Dockerfile"), LoadOptions{Environment: map[string]string{BaseImageEnv: "base:1"}})
		s := checkGenerated(t, p)
		if s.Build == nil || s.Build.Context != dir || s.Build.Dockerfile != "app.Dockerfile" {
			t.Fatalf("build = %+v, want context %s and app.Dockerfile", s.Build, dir)
		}
		if a := s.Build.Args[BaseImageEnv]; a == nil || *a != "base:1" {
			t.Errorf("build args = %v, want %s=base:1", s.Build.Args, BaseImageEnv)
		}
		if p.WorkingDir != dir {
			t.Errorf("WorkingDir = %q, want the Dockerfile's directory", p.WorkingDir)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 2 {
			t.Errorf("the task directory now holds %d entries: a generated file was written there", len(entries))
		}
	})
	t.Run("default image", func(t *testing.T) {
		r, err := Resolve(filepath.Join(dir, "sub"), ResolveOptions{DefaultImage: "some/image:$weird"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := Load(t.Context(), r, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := checkGenerated(t, p)
		if s.Image != "some/image:$weird" || s.Build != nil {
			t.Errorf("image = %q build = %v, want the default image taken literally", s.Image, s.Build)
		}
	})
}

func checkGenerated(t *testing.T, p *types.Project) types.ServiceConfig {
	t.Helper()
	if len(p.Services) != 1 {
		t.Fatalf("services = %v, want only default", p.ServiceNames())
	}
	s, ok := p.Services[DefaultServiceName]
	if !ok {
		t.Fatalf("no service %q", DefaultServiceName)
	}
	if strings.Join(s.Command, " ") != "tail -f /dev/null" {
		t.Errorf("command = %q", s.Command)
	}
	if s.Init == nil || !*s.Init || s.NetworkMode != "none" {
		t.Errorf("init = %v network_mode = %q", s.Init, s.NetworkMode)
	}
	if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) != time.Second {
		t.Errorf("stop_grace_period = %v, want 1s", s.StopGracePeriod)
	}
	if len(p.Networks) != 0 {
		t.Errorf("networks = %v, want none", p.Networks)
	}
	return s
}

func TestLoadInline(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"ctx/Dockerfile": "FROM scratch\n"})
	t.Run("yaml", func(t *testing.T) {
		yml := []byte("services:\n  default:\n    build: ./ctx\n    environment:\n      V: ${CBX_INLINE:-x}\n")
		p, err := Load(t.Context(), FromYAML(yml, dir), LoadOptions{Environment: map[string]string{"CBX_INLINE": "y"}})
		if err != nil {
			t.Fatal(err)
		}
		s := p.Services["default"]
		if s.Build == nil || s.Build.Context != filepath.Join(dir, "ctx") || env(s, "V") != "y" {
			t.Errorf("inline yaml: build %+v env %v", s.Build, s.Environment)
		}
	})
	t.Run("struct", func(t *testing.T) {
		in := &types.Project{Name: "given", WorkingDir: dir, Services: types.Services{
			"main": {Name: "main", Image: "busybox", Command: types.ShellCommand{"echo", "$HOME ${X}"}},
		}}
		p, err := Load(t.Context(), FromProject(in), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(p.Services["main"].Command, " "); got != "echo $HOME ${X}" {
			t.Errorf("command = %q: a struct's values must not be interpolated", got)
		}
		if p.Name != "given" || p.WorkingDir != dir {
			t.Errorf("name %q dir %q", p.Name, p.WorkingDir)
		}
	})
	t.Run("struct without image", func(t *testing.T) {
		in := &types.Project{WorkingDir: dir, Services: types.Services{"main": {Name: "main"}}}
		if _, err := Load(t.Context(), FromProject(in), LoadOptions{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Load = %v, want ErrInvalidConfig", err)
		}
	})
}

func TestLoadProjectName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "My Task")
	writeFiles(t, dir, map[string]string{"compose.yaml": "name: ignored\nservices:\n  default:\n    image: busybox\n    environment:\n      P: ${COMPOSE_PROJECT_NAME}\n"})
	if p := mustLoad(t, dir, LoadOptions{}); p.Name != "mytask" {
		t.Errorf("name = %q, want the directory's normalised name", p.Name)
	}
	p := mustLoad(t, dir, LoadOptions{Name: "cbx-t-1234"})
	if p.Name != "cbx-t-1234" || env(p.Services["default"], "P") != "cbx-t-1234" {
		t.Errorf("name = %q, P = %q, want cbx-t-1234", p.Name, env(p.Services["default"], "P"))
	}
	if _, err := loadDir(t, dir, LoadOptions{Name: "Bad Name"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid name: %v, want ErrInvalidConfig", err)
	}
}

// TestLoadBad covers malformed inputs of every kind. Each error is ErrInvalidConfig and names
// the file, and the line where there is one.
func TestLoadBad(t *testing.T) {
	bad := filepath.Join("..", "testdata", "projects", "bad")
	abs := func(name string) string { p, _ := filepath.Abs(filepath.Join(bad, name)); return p }
	tests := []struct {
		file string
		want []string // substrings of the message
	}{
		{"compose.yaml", []string{abs("compose.yaml") + ": line 8: did not find expected ',' or ']' (in the node starting on line 6)"}},
		{"unknown-top-level-key.yaml", []string{abs("unknown-top-level-key.yaml") + ": line 5: additional properties 'servces' not allowed"}},
		{"no-image-no-build.yaml", []string{abs("no-image-no-build.yaml") + ": line 3:", `"default" has neither an image nor a build context`}},
		{"missing-build-context.yaml", []string{abs("missing-build-context.yaml") + ": line 4:", "build context", "does-not-exist does not exist"}},
		{"missing-dockerfile.yaml", []string{abs("missing-dockerfile.yaml") + ": line 4:", "Missing.Dockerfile does not exist"}},
		{"two-x-default.yaml", []string{abs("two-x-default.yaml") + ": choose default service: services a, b are all marked x-default: true; mark only one"}},
		{"no-default.yaml", []string{`2 services (a, b) and none is the default: choose one for the task, add an agent service beside them, name one "default" or mark one x-default: true`}},
		{"empty.yaml", []string{abs("empty.yaml") + ": empty compose file"}},
		{"anchors-bomb.yaml", []string{abs("anchors-bomb.yaml") + ": more than 50000 YAML nodes once anchors are expanded"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := loadDir(t, filepath.Join(bad, tt.file), LoadOptions{})
			checkInvalid(t, err, tt.want...)
		})
	}
}

func checkInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("error = %v, want ErrInvalidConfig", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error = %q\nwant it to contain %q", err, w)
		}
	}
}

func TestLoadTooLarge(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	b.WriteString("services:\n  default:\n    image: busybox\n    labels:\n")
	for i := 0; b.Len() < 5<<20; i++ {
		fmt.Fprintf(&b, "      label%07d: value\n", i)
	}
	writeFiles(t, dir, map[string]string{"compose.yaml": b.String()})
	_, err := loadDir(t, dir, LoadOptions{})
	checkInvalid(t, err, filepath.Join(dir, "compose.yaml")+": file is larger than the 256 KiB limit")

	_, err = Load(t.Context(), FromYAML(b.Bytes(), dir), LoadOptions{})
	checkInvalid(t, err, "inline compose YAML: file is larger than the 256 KiB limit")

	// The limit is configurable.
	small := "services:\n  default:\n    image: busybox\n"
	_, err = Load(t.Context(), FromYAML([]byte(small), dir), LoadOptions{Limits: Limits{MaxFileSize: 10}})
	checkInvalid(t, err, "larger than the 10 bytes limit")
}

func TestLoadAnchors(t *testing.T) {
	dir := t.TempDir()
	laughs := func(levels, width int) string {
		var b strings.Builder
		b.WriteString("x-l0: &l0 lol\n")
		for i := 1; i <= levels; i++ {
			refs := strings.Repeat(fmt.Sprintf("*l%d, ", i-1), width)
			fmt.Fprintf(&b, "x-l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(refs, ", "))
		}
		b.WriteString("services:\n  default:\n    image: busybox\n")
		return b.String()
	}
	tests := []struct {
		name string
		yaml string
		want string // "" means it loads
	}{
		{"ordinary merge keys", "x-c: &c\n  image: busybox\nservices:\n  default:\n    <<: *c\n  b:\n    <<: *c\n", ""},
		{"3 levels of 9 load", laughs(3, 9), ""},
		{"billion laughs", laughs(9, 9), "more than 50000 YAML nodes once anchors are expanded"},
		{"many small aliases", laughs(4, 6), "more than 1000 alias expansions"},
		{"30 levels of 2", laughs(30, 2), "once anchors are expanded"},
		{"unknown anchor", "services:\n  default:\n    image: busybox\n    labels: *nope\n", `line 4: unknown anchor "nope" referenced`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(t.Context(), FromYAML([]byte(tt.yaml), dir), LoadOptions{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			checkInvalid(t, err, tt.want)
		})
	}
}

// An extended file is checked against the limits before compose-go reads it.
func TestLoadExtendsFileIsGuarded(t *testing.T) {
	dir := t.TempDir()
	bomb, err := os.ReadFile(filepath.Join("..", "testdata", "projects", "bad", "anchors-bomb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"${SUB}/base.yaml": "unused",
		"lib/base.yaml":    string(bomb),
		"compose.yaml":     "services:\n  default:\n    extends:\n      file: ${SUB}/base.yaml\n      service: default\n",
	})
	_, err = loadDir(t, dir, LoadOptions{Environment: map[string]string{"SUB": "lib"}})
	checkInvalid(t, err, filepath.Join(dir, "lib", "base.yaml")+": more than 50000 YAML nodes")
}

func TestLoadIncludeIsGuarded(t *testing.T) {
	dir := t.TempDir()
	bomb, err := os.ReadFile(filepath.Join("..", "testdata", "projects", "bad", "anchors-bomb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{
		"inc/compose.yaml": string(bomb),
		"compose.yaml":     "include:\n  - path: inc/compose.yaml\nservices:\n  main:\n    image: busybox\n",
	})
	_, err = loadDir(t, dir, LoadOptions{})
	checkInvalid(t, err, filepath.Join(dir, "inc", "compose.yaml")+": more than 50000 YAML nodes")
}

func TestLoadSyntaxErrorLines(t *testing.T) {
	tests := []struct {
		yaml string
		want string
	}{
		{"services:\n  default:\n    image: x\n   bad: [\n", "line 4: did not find expected key"},
		{"services:\n  default:\n    image: \"x\n", "line 3: found unexpected end of stream"},
		{"services:\n  default:\n    image: x\n    labels: @x\n", "line 4: found character that cannot start any token"},
		{"services:\n  default:\n    image: x\n  - y\n", "line 4: did not find expected key"},
		{"services:\n  default:\n    image: x\n    image: y\n", `line 4: mapping key "image" already defined at line 3`},
	}
	for _, tt := range tests {
		_, err := Load(t.Context(), FromYAML([]byte(tt.yaml), t.TempDir()), LoadOptions{})
		checkInvalid(t, err, tt.want)
	}
}

func TestLoadEmptyDirWithoutDefaultImage(t *testing.T) {
	_, err := Resolve(t.TempDir(), ResolveOptions{DefaultImage: NoDefaultImage})
	checkInvalid(t, err, "no compose file or Dockerfile in", "no default image is configured")
}

func TestLoadSchemaErrorLine(t *testing.T) {
	for yml, want := range map[string]string{
		"services:\n  default:\n    image: x\n  web:\n    image: y\n    bogus: 1\n":      "inline compose YAML: line 6: services.web additional properties 'bogus' not allowed",
		"services:\n  default:\n    image: x\n  web:\n    image: y\n    ports: \"80\"\n": "inline compose YAML: line 6: services.web.ports must be a array",
		"services:\n  default:\n    image: x\n    privileged: maybe\n":                   "inline compose YAML: line 4: error while interpolating services.default.privileged",
		"services:\n  default:\n    image: x\nx: 1\nservce:\n  a: 1\n":                   "inline compose YAML: line 4: additional properties '",
	} {
		_, err := Load(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{})
		checkInvalid(t, err, want)
	}
}
