package compose

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup"
)

const normalizeYAML = `services:
  default:
    image: busybox
    labels:
      dev.composebox.task: spoofed
      mine: kept
    depends_on:
      web:
        condition: service_healthy
  web:
    build: ./web
    init: false
    stop_grace_period: 7s
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
      start_interval: 100ms
    networks: [front]
networks:
  front: {}
  outside:
    external: true
volumes:
  data: {}
  shared:
    external: true
`

func loadNormalizeProject(t *testing.T) *types.Project {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"web/Dockerfile": "FROM scratch\n", "compose.yaml": normalizeYAML})
	return mustLoad(t, dir, LoadOptions{})
}

func TestNormalize(t *testing.T) {
	in := loadNormalizeProject(t)
	before, _ := in.MarshalYAML()
	created := time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("x", 3600))
	p, err := Normalize(in, NormalizeOptions{
		Name: "cbx-task-abcd1234", Task: "task", Sample: "abcd1234", Owner: "host:1:2", Created: created,
		APIVersion: "1.41", Images: map[string]string{"web": "cbx-task-web:0123"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := in.MarshalYAML(); string(after) != string(before) {
		t.Error("Normalize changed its input")
	}
	if p.Name != "cbx-task-abcd1234" {
		t.Errorf("name = %q", p.Name)
	}
	ours := map[string]string{
		cleanup.LabelManaged: "true", cleanup.LabelTask: "task", cleanup.LabelSample: "abcd1234",
		cleanup.LabelOwner: "host:1:2", cleanup.LabelCreated: "2026-11-21T09:00:00Z",
	}
	for name, s := range p.Services {
		for k, v := range ours {
			if s.Labels[k] != v {
				t.Errorf("service %s label %s = %q, want %q", name, k, s.Labels[k], v)
			}
		}
		for k, v := range map[string]string{
			ComposeProjectLabel: "cbx-task-abcd1234", ComposeServiceLabel: name, ComposeOneoffLabel: "False",
			ComposeVersionLabel: ComposeVersion, ComposeWorkingDirLabel: in.WorkingDir,
			ComposeConfigFilesLabel: strings.Join(in.ComposeFiles, ","),
		} {
			if s.CustomLabels[k] != v {
				t.Errorf("service %s compose label %s = %q, want %q", name, k, s.CustomLabels[k], v)
			}
		}
	}
	if p.Services["default"].Labels["mine"] != "kept" {
		t.Error("a user label was lost")
	}
	for name, n := range p.Networks {
		if got := n.Labels[cleanup.LabelManaged]; (got == "true") == bool(n.External) {
			t.Errorf("network %s (external %v) managed label = %q", name, n.External, got)
		}
	}
	for name, v := range p.Volumes {
		if got := v.Labels[cleanup.LabelSample]; (got == "abcd1234") == bool(v.External) {
			t.Errorf("volume %s (external %v) sample label = %q", name, v.External, got)
		}
	}

	for key, want := range map[string]string{"default": "cbx-task-abcd1234_default", "front": "cbx-task-abcd1234_front", "outside": "outside"} {
		if got := p.Networks[key].Name; got != want {
			t.Errorf("network %s name = %q, want %q", key, got, want)
		}
	}
	for key, want := range map[string]string{"data": "cbx-task-abcd1234_data", "shared": "shared"} {
		if got := p.Volumes[key].Name; got != want {
			t.Errorf("volume %s name = %q, want %q", key, got, want)
		}
	}

	def, web := p.Services["default"], p.Services["web"]
	if def.Init == nil || !*def.Init || def.StopGracePeriod == nil || time.Duration(*def.StopGracePeriod) != time.Second {
		t.Errorf("default: init %v stop grace %v, want true and 1s", def.Init, def.StopGracePeriod)
	}
	if web.Init == nil || *web.Init || time.Duration(*web.StopGracePeriod) != 7*time.Second {
		t.Errorf("web: init %v stop grace %v, want its own false and 7s", web.Init, web.StopGracePeriod)
	}
	if web.HealthCheck.StartInterval != nil {
		t.Error("start_interval kept for API 1.41")
	}
	if web.Image != "cbx-task-web:0123" || web.Build != nil {
		t.Errorf("web image %q build %v, want the prebuilt image and no build", web.Image, web.Build)
	}
}

func TestNormalizeOptions(t *testing.T) {
	in := loadNormalizeProject(t)
	t.Run("defaults", func(t *testing.T) {
		p, err := Normalize(in, NormalizeOptions{StopGrace: 3 * time.Second, APIVersion: "1.44"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != in.Name {
			t.Errorf("name = %q, want the loaded %q", p.Name, in.Name)
		}
		if got := p.Services["default"].Labels[cleanup.LabelOwner]; got != cleanup.SelfOwner() {
			t.Errorf("owner = %q, want this process", got)
		}
		if _, err := time.Parse(time.RFC3339, p.Services["default"].Labels[cleanup.LabelCreated]); err != nil {
			t.Errorf("created label: %v", err)
		}
		if time.Duration(*p.Services["default"].StopGracePeriod) != 3*time.Second {
			t.Error("StopGrace option ignored")
		}
		if p.Services["web"].HealthCheck.StartInterval == nil {
			t.Error("start_interval stripped on API 1.44")
		}
		if p.Services["web"].Build == nil {
			t.Error("build dropped without an image")
		}
	})
	for name, opts := range map[string]NormalizeOptions{
		"bad name":      {Name: "Has Space"},
		"unknown image": {Images: map[string]string{"nope": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Normalize(in, opts); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Normalize = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestNormalizeRejectsContainerName(t *testing.T) {
	p := mustLoad(t, "../testdata/projects/bad/container-name.yaml", LoadOptions{})
	_, err := Normalize(p, NormalizeOptions{Name: "cbx-x-1"})
	checkInvalid(t, err, "container_name is not allowed", `service default ("fixed-name")`)
}

func TestNormalizeRejectsFixedNames(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": `services:
  default:
    image: busybox
    networks: [n]
    volumes: [v:/v, ext:/e]
networks:
  n:
    name: shared-net
volumes:
  v:
    name: shared-vol
  ext:
    external: true
    name: outside
`})
	_, err := Normalize(mustLoad(t, dir, LoadOptions{}), NormalizeOptions{Name: "cbx-x-1"})
	checkInvalid(t, err, `network n (name "shared-net"), volume v (name "shared-vol")`)
}

func TestProjectName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	tests := []struct{ task, id, want string }{
		{"swe_bench", "ab12cd34", "cbx-swe_bench-ab12cd34"},
		{"My Task!", "AB12", "cbx-my-task-ab12"},
		{"a-very-long-task-name-indeed-more-than-twenty", "0001", "cbx-a-very-long-task-nam-0001"},
		{"trailing-cut-at-dash-x", "1", "cbx-trailing-cut-at-dash-1"}, {"abcdefghijklmnopqrs-tail", "2", "cbx-abcdefghijklmnopqrs-2"},
		{"", "ab12", "cbx-ab12"},
		{"ÜBER/täsk", "x", "cbx-ber-t-sk-x"},
		{"---", "z", "cbx-z"},
	}
	for _, tt := range tests {
		got := ProjectName(tt.task, tt.id)
		if got != tt.want {
			t.Errorf("ProjectName(%q, %q) = %q, want %q", tt.task, tt.id, got, tt.want)
		}
		if !valid.MatchString(got) {
			t.Errorf("ProjectName(%q, %q) = %q is not a valid project name", tt.task, tt.id, got)
		}
	}
}

func TestNewSampleID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewSampleID()
		if !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(id) {
			t.Fatalf("NewSampleID() = %q", id)
		}
		if seen[id] {
			t.Fatalf("NewSampleID repeated %q", id)
		}
		seen[id] = true
	}
}
