package compose

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
)

const planYAML = `services:
  default:
    image: busybox:1
  other:
    image: busybox:1
  db:
    image: postgres:16
  web:
    image: ignored-name
    build:
      context: ./web
      args:
        A: one
        FROM_ENV:
  tool:
    build:
      context: ./tool
      dockerfile: ../tool.Dockerfile
`

var planFiles = map[string]string{
	"web/Dockerfile":    "FROM scratch\nCOPY . /\n",
	"web/app/main.txt":  "hello",
	"web/.dockerignore": "ignored/\n*.log\n!keep.log\n",
	"web/ignored/x":     "not sent to the builder",
	"web/debug.log":     "not sent either",
	"web/keep.log":      "sent",
	"tool/.keep":        "",
	"tool.Dockerfile":   "FROM scratch\n",
}

func plan(t *testing.T, dir string) ImagePlan {
	t.Helper()
	p := mustLoad(t, dir, LoadOptions{Environment: map[string]string{"FROM_ENV": "env-value"}})
	ip, err := PlanImages(p, "My Task")
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

func newPlanDir(t *testing.T) string {
	dir := t.TempDir()
	writeFiles(t, dir, planFiles)
	writeFiles(t, dir, map[string]string{"compose.yaml": planYAML})
	return dir
}

func tagOf(t *testing.T, ip ImagePlan, service string) string {
	t.Helper()
	for _, b := range ip.Builds {
		if b.Service == service {
			return b.Tag
		}
	}
	t.Fatalf("no build for %s in %+v", service, ip)
	return ""
}

func TestPlanImages(t *testing.T) {
	dir := newPlanDir(t)
	ip := plan(t, dir)
	if !slices.Equal(ip.Existing, []string{"busybox:1", "postgres:16"}) {
		t.Errorf("Existing = %v", ip.Existing)
	}
	if len(ip.Builds) != 2 || ip.Builds[0].Service != "tool" || ip.Builds[1].Service != "web" {
		t.Fatalf("Builds = %+v, want tool then web", ip.Builds)
	}
	web := ip.Builds[1]
	if !regexp.MustCompile(`^cbx-my-task-web:[0-9a-f]{16}$`).MatchString(web.Tag) {
		t.Errorf("tag = %q", web.Tag)
	}
	if web.Context != filepath.Join(dir, "web") || web.Dockerfile != "Dockerfile" {
		t.Errorf("context %q dockerfile %q", web.Context, web.Dockerfile)
	}
	if web.Args["A"] != "one" || web.Args["FROM_ENV"] != "env-value" {
		t.Errorf("args = %v", web.Args)
	}
	if web.Labels[labels.LabelManaged] != "true" || web.Labels[labels.LabelTask] != "My Task" {
		t.Errorf("labels = %v", web.Labels)
	}
	if web.Build == nil || web.Build.Context != web.Context {
		t.Errorf("Build = %+v", web.Build)
	}
}

// The tag is a hash of what the builder would get: the same content anywhere gives the same
// tag, and any change to it gives another.
func TestPlanImagesHash(t *testing.T) {
	base := plan(t, newPlanDir(t))
	webTag, toolTag := tagOf(t, base, "web"), tagOf(t, base, "tool")
	if again := plan(t, newPlanDir(t)); tagOf(t, again, "web") != webTag {
		t.Errorf("the same content in another directory gives %s, want %s", tagOf(t, again, "web"), webTag)
	}
	tests := []struct {
		name    string
		change  func(t *testing.T, dir string)
		changes bool
	}{
		{"file content", func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"web/app/main.txt": "bye"}) }, true},
		{"new file", func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"web/app/new.txt": ""}) }, true},
		{"file mode", func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "web/app/main.txt"), 0o755) }, true},
		{"symlink", func(t *testing.T, dir string) { os.Symlink("main.txt", filepath.Join(dir, "web/app/link")) }, true},
		{"dockerfile", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"web/Dockerfile": "FROM scratch\n"})
		}, true},
		{"kept by !keep.log", func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"web/keep.log": "changed"}) }, true},
		{"build arg", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"compose.yaml": strings.Replace(planYAML, "A: one", "A: two", 1)})
		}, true},
		{"target", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"compose.yaml": strings.Replace(planYAML, "FROM_ENV:\n", "FROM_ENV:\n      target: final\n", 1)})
		}, true},
		{"ignored dir", func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"web/ignored/y": "new"}) }, false},
		{"ignored *.log", func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"web/debug.log": "other"}) }, false},
		{"mtime", func(t *testing.T, dir string) {
			os.Chtimes(filepath.Join(dir, "web/app/main.txt"), time0, time0)
		}, false},
		{"image name", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"compose.yaml": strings.Replace(planYAML, "ignored-name", "other-name", 1)})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newPlanDir(t)
			tt.change(t, dir)
			got := plan(t, dir)
			if changed := tagOf(t, got, "web") != webTag; changed != tt.changes {
				t.Errorf("tag changed = %v, want %v", changed, tt.changes)
			}
			if tagOf(t, got, "tool") != toolTag {
				t.Error("changing web changed tool's tag")
			}
		})
	}
	t.Run("dockerfile outside the context", func(t *testing.T) {
		dir := newPlanDir(t)
		writeFiles(t, dir, map[string]string{"tool.Dockerfile": "FROM scratch\nENV X=1\n"})
		if tagOf(t, plan(t, dir), "tool") == toolTag {
			t.Error("changing a Dockerfile outside the context kept the tag")
		}
	})
}

func TestPlanImagesErrors(t *testing.T) {
	p := project(types.ServiceConfig{Name: "x"})
	if _, err := PlanImages(p, "t"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("PlanImages(no image) = %v, want ErrInvalidConfig", err)
	}
	p = project(types.ServiceConfig{Name: "x", Build: &types.BuildConfig{Context: t.TempDir(), Dockerfile: "Nope"}})
	if _, err := PlanImages(p, "t"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("PlanImages(missing Dockerfile) = %v, want ErrInvalidConfig", err)
	}
	p = project(types.ServiceConfig{Name: "x", Build: &types.BuildConfig{Context: "https://github.com/x/y.git"}})
	ip, err := PlanImages(p, "")
	if err != nil || len(ip.Builds) != 1 || !strings.HasPrefix(ip.Builds[0].Tag, "cbx-x:") {
		t.Errorf("PlanImages(remote context) = %+v, %v", ip, err)
	}
}

var time0 = time.Unix(0, 0)
