package compose

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/internal/images/imagespec"
)

const (
	suitesDir = "../testdata/projects/suites"
	rulesDir  = "../testdata/projects/compose-rules"
)

// suiteCase is one case of a suite project's expect.yaml (testdata/projects/suites/README.md).
type suiteCase struct {
	Name            string                         `yaml:"name"`
	Path            string                         `yaml:"path"`
	Default         string                         `yaml:"default"`
	AgentImage      string                         `yaml:"agent_image"`
	Images          map[string]string              `yaml:"images"`
	Metadata        map[string]string              `yaml:"metadata"`
	Env             map[string]string              `yaml:"env"`
	AllowMountRoots []string                       `yaml:"allow_mount_roots"`
	Outcome         string                         `yaml:"outcome"`
	Reasons         []string                       `yaml:"reasons"`
	Task            string                         `yaml:"task"`
	Layout          string                         `yaml:"layout"`
	DefaultService  string                         `yaml:"default_service"`
	Services        []string                       `yaml:"services"`
	Builds          *[]string                      `yaml:"builds"`
	Adapted         []string                       `yaml:"adapted"`
	NoAdaptations   bool                           `yaml:"no_adaptations"`
	Aliases         map[string]map[string][]string `yaml:"aliases"`
	Environment     map[string]map[string]string   `yaml:"environment"`
	Binds           map[string]map[string]string   `yaml:"binds"`
	ImagesUsed      map[string]string              `yaml:"images_used"`
	Unset           *[]string                      `yaml:"unset"`
}

// TestSuitesCorpus loads every project of testdata/projects/suites as a runner would pass it and
// checks the outcome its expect.yaml states: for a rejection, the reasons; for a project that
// runs, its task name, layout, default service, services, builds, the per-sample adaptations
// and what a sample gets (aliases, environment, binds, images).
func TestSuitesCorpus(t *testing.T) {
	if projects := runCorpus(t, suitesDir); projects < 20 {
		t.Errorf("%d suite projects, want the whole corpus", projects)
	}
}

// TestComposeRules checks the projects of testdata/projects/compose-rules, one rule of compose
// each, as TestSuitesCorpus checks the suites'.
func TestComposeRules(t *testing.T) {
	if projects := runCorpus(t, rulesDir); projects < 5 {
		t.Errorf("%d projects, want one per rule", projects)
	}
}

// runCorpus runs the expect.yaml cases of every project directory under root, and returns how
// many projects there are.
func runCorpus(t *testing.T, root string) int {
	base, err := imagespec.BaseRef(imagespec.DefaultBusybox)
	if err != nil {
		t.Skipf("no base image reference: %v", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	projects := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		projects++
		dir, err := filepath.Abs(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "expect.yaml"))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		var expect struct {
			Cases []suiteCase `yaml:"cases"`
		}
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		dec.KnownFields(true)
		if err := dec.Decode(&expect); err != nil || len(expect.Cases) == 0 {
			t.Errorf("%s/expect.yaml: %v (%d cases)", e.Name(), err, len(expect.Cases))
			continue
		}
		for _, c := range expect.Cases {
			t.Run(e.Name()+"/"+c.Name, func(t *testing.T) { runSuiteCase(t, dir, base, c) })
		}
	}
	return projects
}

func runSuiteCase(t *testing.T, dir, base string, c suiteCase) {
	sub := func(s string) string { return strings.ReplaceAll(s, "{dir}", dir) }
	subAll := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if v == "base" {
				v = base
			}
			out[k] = sub(v)
		}
		return out
	}
	agent := c.AgentImage
	if agent == "base" {
		agent = base
	}

	r, err := Resolve(filepath.Join(dir, c.Path), ResolveOptions{})
	if err != nil {
		checkOutcome(t, c, err)
		return
	}
	project := ProjectName(r.TaskName, "0a1b2c3d")
	sampleDir := filepath.Join(t.TempDir(), project)
	vars := r.SampleVars(project, sampleDir)
	policy := DefaultPolicy()
	for _, root := range c.AllowMountRoots {
		policy.AllowedMountRoots = append(policy.AllowedMountRoots, sub(root))
	}
	policy = policy.AllowingDirs(vars.DirPaths()...)
	p, err := Load(t.Context(), r, LoadOptions{
		Name:           project,
		Environment:    subAll(c.Env),
		Metadata:       subAll(c.Metadata),
		SampleEnv:      vars.Env,
		DefaultService: c.Default,
		AgentImage:     agent,
		ImageOverrides: subAll(c.Images),
		Policy:         &policy,
	})
	if err != nil {
		checkOutcome(t, c, err)
		return
	}
	policy.ApplyDefaults(p)
	def, err := DefaultService(p)
	if err != nil {
		checkOutcome(t, c, err)
		return
	}
	plan, err := PlanImages(p, r.TaskName)
	if err != nil {
		checkOutcome(t, c, err)
		return
	}
	built := map[string]string{}
	var builds []string
	for _, b := range plan.Builds {
		built[b.Service] = b.Tag
		builds = append(builds, b.Service)
	}
	var adapted []string
	np, err := Normalize(p, NormalizeOptions{Name: project, Task: r.TaskName, Sample: "0a1b2c3d", Images: built,
		OnAdapt: func(a Adaptation) { adapted = append(adapted, a.Message) }})
	if err != nil {
		checkOutcome(t, c, err)
		return
	}
	if c.Outcome != "ok" {
		t.Fatalf("loaded, passed the policy and normalised; want %s: %v", c.Outcome, c.Reasons)
	}

	tmpl := func(s string) string {
		return strings.NewReplacer("{dir}", dir, "{project}", project, "{sampledir}", sampleDir).Replace(s)
	}
	if c.Task != "" && r.TaskName != c.Task {
		t.Errorf("task = %q, want %q", r.TaskName, c.Task)
	}
	if c.Layout != "" && string(r.Layout) != c.Layout {
		t.Errorf("layout = %q, want %q", r.Layout, c.Layout)
	}
	if c.DefaultService != "" && def != c.DefaultService {
		t.Errorf("default service = %q, want %q", def, c.DefaultService)
	}
	if c.Services != nil && !slices.Equal(p.ServiceNames(), c.Services) {
		t.Errorf("services = %v, want %v", p.ServiceNames(), c.Services)
	}
	if c.Builds != nil && !slices.Equal(builds, *c.Builds) {
		t.Errorf("builds = %v, want %v", builds, *c.Builds)
	}
	all := strings.Join(adapted, "\n")
	for _, want := range c.Adapted {
		if !strings.Contains(all, tmpl(want)) {
			t.Errorf("no adaptation says %q; they are:\n%s", tmpl(want), all)
		}
	}
	if c.NoAdaptations && len(adapted) > 0 {
		t.Errorf("adaptations, want none:\n%s", all)
	}
	for svc, nets := range c.Aliases {
		s, ok := np.Services[svc]
		if !ok {
			t.Errorf("aliases: no service %s", svc)
			continue
		}
		for net, want := range nets {
			cfg, attached := s.Networks[net]
			if !attached {
				t.Errorf("service %s is not on network %s (networks: %v)", svc, net, sortedKeys(s.Networks))
				continue
			}
			var have []string
			if cfg != nil {
				have = cfg.Aliases
			}
			for _, a := range want {
				if !slices.Contains(have, tmpl(a)) {
					t.Errorf("service %s on %s: aliases %v, want %s among them", svc, net, have, tmpl(a))
				}
			}
		}
	}
	for svc, vars := range c.Environment {
		for k, want := range vars {
			v := np.Services[svc].Environment[k]
			if v == nil || *v != tmpl(want) {
				t.Errorf("service %s: %s = %v, want %q", svc, k, strDeref(v), tmpl(want))
			}
		}
	}
	for svc, binds := range c.Binds {
		for src, target := range binds {
			if !hasBind(np.Services[svc], tmpl(src), target) {
				t.Errorf("service %s binds %v, want %s at %s", svc, np.Services[svc].Volumes, tmpl(src), target)
			}
		}
	}
	if c.Unset != nil && !slices.Equal(UnsetVariables(p), *c.Unset) {
		t.Errorf("variables left blank: %v, want %v", UnsetVariables(p), *c.Unset)
	}
	for svc, want := range c.ImagesUsed {
		if want == "base" {
			want = base
		}
		if got := np.Services[svc].Image; got != want || np.Services[svc].Build != nil {
			t.Errorf("service %s runs %q (build %v), want %q", svc, got, np.Services[svc].Build != nil, want)
		}
	}
}

func checkOutcome(t *testing.T, c suiteCase, err error) {
	t.Helper()
	var want error
	switch c.Outcome {
	case "invalid_config":
		want = ErrInvalidConfig
	case "policy_violation":
		want = ErrPolicyViolation
	default:
		t.Fatalf("unexpected error: %v", err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v is not %s", err, c.Outcome)
	}
	if len(c.Reasons) == 0 {
		t.Errorf("a rejection case must say why (reasons); the error is: %v", err)
	}
	for _, r := range c.Reasons {
		if !strings.Contains(err.Error(), r) {
			t.Errorf("error lacks %q: %v", r, err)
		}
	}
}

func hasBind(s types.ServiceConfig, source, target string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Source == source && v.Target == target {
			return true
		}
	}
	return false
}

func strDeref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
