package compose

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

const projectsDir = "../testdata/projects"

// TestTestdataProjects owns every scenario of testdata/projects that runs: each resolves, loads,
// passes the default policy, normalises and plans, with the shape the lifecycle tests rely on.
func TestTestdataProjects(t *testing.T) {
	checks := map[string]func(t *testing.T, r *Resolution, p *types.Project, plan ImagePlan){
		"dockerfile-only": func(t *testing.T, r *Resolution, p *types.Project, plan ImagePlan) {
			if r.Source != SourceDockerfile {
				t.Errorf("source = %s", r.Source)
			}
			checkGenerated(t, p)
			if len(plan.Builds) != 1 || plan.Builds[0].Args[BaseImageEnv] == "" {
				t.Errorf("plan = %+v, want one build with the base image arg", plan)
			}
		},
		"multi-service": func(t *testing.T, r *Resolution, p *types.Project, plan ImagePlan) {
			wantOrder(t, p, "default", "db", "web")
			for _, dep := range []string{"web", "db"} {
				if c := p.Services["default"].DependsOn[dep].Condition; c != types.ServiceConditionHealthy {
					t.Errorf("default depends on %s with %q, want service_healthy", dep, c)
				}
				hc := p.Services[dep].HealthCheck
				if hc == nil || time.Duration(*hc.Interval) != time.Second || time.Duration(*hc.Timeout) != 2*time.Second || *hc.Retries != 30 {
					t.Errorf("%s healthcheck = %+v, want 1s/2s/30", dep, hc)
				}
				if hc != nil && hc.StartInterval != nil {
					t.Errorf("%s uses start_interval, which engine 20.10 lacks", dep)
				}
			}
			if got := strings.Join(p.Services["web"].Command, " "); got != "httpd -f -p 80 -h /www" {
				t.Errorf("web command = %q", got)
			}
			if len(plan.Builds) != 1 || plan.Builds[0].Service != "web" || plan.Builds[0].Args["BASE"] == "" {
				t.Errorf("plan = %+v, want web built FROM the base image", plan)
			}
		},
		"x-default": func(t *testing.T, r *Resolution, p *types.Project, plan ImagePlan) {
			wantOrder(t, p, "main", "helper")
		},
		"build-x-default": func(t *testing.T, r *Resolution, p *types.Project, plan ImagePlan) {
			wantOrder(t, p, "app", "api")
			if c := p.Services["app"].DependsOn["api"].Condition; c != types.ServiceConditionHealthy {
				t.Errorf("app depends on api with %q, want service_healthy", c)
			}
			if len(plan.Builds) != 1 || plan.Builds[0].Service != "app" || plan.Builds[0].Args["BASE"] == "" {
				t.Errorf("plan = %+v, want app built FROM the base image", plan)
			}
		},
		"init-sidecar": func(t *testing.T, r *Resolution, p *types.Project, plan ImagePlan) {
			wantOrder(t, p, "default", "setup")
			if c := p.Services["default"].DependsOn["setup"].Condition; c != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("default depends on setup with %q", c)
			}
		},
	}
	// Owned by TestLoadBad, the policy tests, TestSuitesCorpus and TestComposeRules.
	failing := map[string]bool{"bad": true, "policy-violations": true, "suites": true, "compose-rules": true}
	entries, err := os.ReadDir(projectsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if failing[e.Name()] {
			continue
		}
		check, ok := checks[e.Name()]
		if !ok {
			t.Errorf("testdata/projects/%s has no owning check here", e.Name())
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			r, err := Resolve(filepath.Join(projectsDir, e.Name()), ResolveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := Load(t.Context(), r, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := DefaultPolicy().Check(p); err != nil {
				t.Fatalf("policy: %v", err)
			}
			if _, err := Normalize(p, NormalizeOptions{Name: ProjectName(e.Name(), NewSampleID()), Task: e.Name()}); err != nil {
				t.Fatalf("normalize: %v", err)
			}
			plan, err := PlanImages(p, e.Name())
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			check(t, r, p, plan)
		})
	}
}

func wantOrder(t *testing.T, p *types.Project, want ...string) {
	t.Helper()
	got, err := ServiceOrder(p)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ServiceOrder = %v, %v; want %v", got, err, want)
	}
}

func TestLoadRefusesSpecialFiles(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	r := &Resolution{Source: SourceFile, Files: []string{"/dev/zero"}, WorkingDir: t.TempDir()}
	if _, err := Load(t.Context(), r, LoadOptions{}); !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "/dev/zero: outside the allowed roots") {
		t.Errorf("Load(-f /dev/zero) = %v, want it refused as outside the roots", err)
	}
	// Even where any host path may be read, a special file is not opened.
	anywhere := DefaultPolicy()
	anywhere.AllowAnyMount = true
	if _, err := Load(t.Context(), r, LoadOptions{Policy: &anywhere}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(-f /dev/zero) with any-mount = %v, want it refused", err)
	}
	for name, yml := range map[string]string{
		"extends":       "services:\n  default:\n    extends:\n      file: /dev/zero\n      service: x\n",
		"include":       "include: [/dev/zero]\nservices:\n  default:\n    image: busybox\n",
		"env_file":      "services:\n  default:\n    image: busybox\n    env_file: /dev/zero\n",
		"label_file":    "services:\n  default:\n    image: busybox\n    label_file: [/dev/zero]\n",
		"env_file path": "services:\n  default:\n    image: busybox\n    env_file:\n      - path: /dev/zero\n        required: false\n",
	} {
		t.Run(name, func(t *testing.T) {
			// Outside the task directory: never opened.
			_, err := Load(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{})
			if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "/dev/zero: outside the allowed roots") {
				t.Errorf("Load = %v, want /dev/zero refused as outside the task directory", err)
			}
			// Allowed from anywhere, still never read: it is not a regular file.
			_, err = Load(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{Policy: &Policy{AllowAnyMount: true}})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "/dev/zero") || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Load with any-mount = %v, want /dev/zero refused", err)
			}
		})
	}
}
