package compose

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/cleanup/labels"
)

const normalizeYAML = `services:
  default:
    image: busybox
    labels:
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
      start_period: 5s
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
	p := mustLoad(t, dir, LoadOptions{Policy: &Policy{AllowOtherContainers: true}}) // the external volume
	// The policy refuses a file that sets composebox's labels; Normalize must still overwrite one
	// that reached the project another way.
	def := p.Services["default"]
	def.Labels[labels.LabelTask] = "spoofed"
	p.Services["default"] = def
	return p
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
		labels.LabelManaged: "true", labels.LabelTask: "task", labels.LabelSample: "abcd1234",
		labels.LabelOwner: "host:1:2", labels.LabelCreated: "2026-11-21T09:00:00Z",
	}
	for name, s := range p.Services {
		for k, v := range ours {
			if s.Labels[k] != v {
				t.Errorf("service %s label %s = %q, want %q", name, k, s.Labels[k], v)
			}
		}
		for k, v := range map[string]string{
			labels.ComposeProjectLabel: "cbx-task-abcd1234", labels.ComposeServiceLabel: name, labels.ComposeOneoffLabel: "False",
			labels.ComposeVersionLabel: labels.ComposeVersion, labels.ComposeWorkingDirLabel: in.WorkingDir,
			labels.ComposeConfigFilesLabel: strings.Join(in.ComposeFiles, ","),
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
		if got := n.Labels[labels.LabelManaged]; (got == "true") == bool(n.External) {
			t.Errorf("network %s (external %v) managed label = %q", name, n.External, got)
		}
	}
	for name, v := range p.Volumes {
		if got := v.Labels[labels.LabelSample]; (got == "abcd1234") == bool(v.External) {
			t.Errorf("volume %s (external %v) sample label = %q", name, v.External, got)
		}
	}

	// The external network becomes the sample's own; the external volume stays as it is.
	for key, want := range map[string]string{"default": "cbx-task-abcd1234_default", "front": "cbx-task-abcd1234_front", "outside": "cbx-task-abcd1234_outside"} {
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
		if got := p.Services["default"].Labels[labels.LabelOwner]; got != labels.SelfOwner() {
			t.Errorf("owner = %q, want this process", got)
		}
		if _, err := time.Parse(time.RFC3339, p.Services["default"].Labels[labels.LabelCreated]); err != nil {
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

// TestNormalizeAdapts: what would collide between parallel samples, or join them, is changed
// per sample and reported, never refused.
func TestNormalizeAdapts(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": `services:
  default:
    image: busybox
    container_name: victim
    ports: ["1337:1337", "127.0.0.1:8080:80/udp", "10.0.0.5:9000:9000", "127.0.0.1::5900", "3000"]
    networks:
      shared:
        aliases: [victim.local]
      n: {}
    volumes: [v:/v, ext:/e]
  sidecar:
    image: busybox
    container_name: side
    network_mode: "service:default"
  offline:
    image: busybox
    container_name: lonely
    network_mode: none
networks:
  n:
    name: shared-net
  shared:
    external: true
    name: ctfnet
volumes:
  v:
    name: shared-vol
  ext:
    external: true
    name: outside
`})
	in := mustLoad(t, dir, LoadOptions{Policy: &Policy{AllowOtherContainers: true, AllowPublicPorts: true}})
	var got []Adaptation
	p, err := Normalize(in, NormalizeOptions{Name: "cbx-x-1", OnAdapt: func(a Adaptation) { got = append(got, a) }})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range p.Services {
		if s.ContainerName != "" {
			t.Errorf("service %s keeps container_name %q", name, s.ContainerName)
		}
	}
	// victim and side (sharing default's network stack) are aliases on both of default's networks.
	for _, key := range []string{"shared", "n"} {
		aliases := p.Services["default"].Networks[key].Aliases
		for _, want := range []string{"victim", "side"} {
			if !slices.Contains(aliases, want) {
				t.Errorf("network %s aliases = %v, want %s among them", key, aliases, want)
			}
		}
	}
	if a := p.Services["default"].Networks["shared"].Aliases; !slices.Contains(a, "victim.local") {
		t.Errorf("shared aliases = %v lost victim.local", a)
	}
	if in.Services["default"].Networks["n"] != nil && len(in.Services["default"].Networks["n"].Aliases) > 0 {
		t.Error("Normalize changed its input's aliases")
	}
	wantPorts := []types.ServicePortConfig{
		{HostIP: "127.0.0.1", Target: 1337, Protocol: "tcp", Mode: "ingress"},
		{HostIP: "127.0.0.1", Target: 80, Protocol: "udp", Mode: "ingress"},
		{HostIP: "10.0.0.5", Target: 9000, Protocol: "tcp", Mode: "ingress"},
		{HostIP: "127.0.0.1", Target: 5900, Protocol: "tcp", Mode: "ingress"},
		{HostIP: "127.0.0.1", Target: 3000, Protocol: "tcp", Mode: "ingress"}, // no host port: still loopback
	}
	if ports := p.Services["default"].Ports; !slices.EqualFunc(ports, wantPorts, func(a, b types.ServicePortConfig) bool {
		return a.HostIP == b.HostIP && a.Target == b.Target && a.Published == b.Published && a.Protocol == b.Protocol
	}) {
		t.Errorf("ports = %+v, want %+v", ports, wantPorts)
	}
	if n := p.Networks["shared"]; bool(n.External) || n.Name != "cbx-x-1_shared" || n.Labels[labels.LabelManaged] != "true" {
		t.Errorf("network shared = %+v, want the sample's own, labelled", n)
	}
	if n := p.Networks["n"].Name; n != "cbx-x-1_shared-net" {
		t.Errorf("network n name = %q", n)
	}
	if v := p.Volumes["v"].Name; v != "cbx-x-1_shared-vol" {
		t.Errorf("volume v name = %q", v)
	}
	if v := p.Volumes["ext"]; !bool(v.External) || v.Name != "outside" {
		t.Errorf("external volume = %+v, want it left alone", v)
	}
	var msgs []string
	for _, a := range got {
		msgs = append(msgs, a.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		`external network shared ("ctfnet") replaced by the sample's own network "cbx-x-1_shared"`,
		`network n: fixed name "shared-net" prefixed with the project name: "cbx-x-1_shared-net"`,
		`volume v: fixed name "shared-vol" prefixed`,
		`service "default": container_name "victim" dropped; it is a network alias on networks n, shared instead`,
		`service "sidecar": container_name "side" dropped; it is a network alias on service "default"'s networks (n, shared)`,
		`service "offline": container_name "lonely" dropped; with network_mode none there is no network`,
		`service "default": host port 1337 of container port 1337/tcp published on an ephemeral port of 127.0.0.1`,
		`service "default": host port 127.0.0.1:8080 of container port 80/udp`,
		`service "default": host port 10.0.0.5:9000 of container port 9000/tcp published on an ephemeral port of 10.0.0.5`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("adaptations lack %q; got:\n%s", want, all)
		}
	}
	if len(got) != 9 {
		t.Errorf("%d adaptations, want 9:\n%s", len(got), all)
	}

	// A second Normalize of the adapted project changes nothing more.
	var again []Adaptation
	if _, err := Normalize(p, NormalizeOptions{Name: "cbx-x-1", OnAdapt: func(a Adaptation) { again = append(again, a) }}); err != nil || len(again) != 0 {
		t.Errorf("normalizing again: %v, %v", again, err)
	}
}

// compose's own network-links fixture: network_mode bridge runs on the sample's own default
// network, which Normalize adds (labelled, named for the sample), with links and container_name
// aliases kept; a service that asks for the engine's bridge (allowed by the caller) keeps it.
func TestNormalizeOwnBridge(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"compose.yaml": `services:
  container1:
    image: busybox
    network_mode: bridge
    container_name: first
  container2:
    image: busybox
    network_mode: default
    links:
      - container1
    x-default: true
  legacy:
    image: busybox
    network_mode: bridge
    x-composebox-engine-bridge: true
`})
	in := mustLoad(t, dir, LoadOptions{Policy: &Policy{AllowHostAccess: true}})
	var got []Adaptation
	p, err := Normalize(in, NormalizeOptions{Name: "cbx-x-1", OnAdapt: func(a Adaptation) { got = append(got, a) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"container1", "container2"} {
		s := p.Services[name]
		if _, ok := s.Networks["default"]; s.NetworkMode != "" || !ok || len(s.Networks) != 1 {
			t.Errorf("%s: network_mode %q networks %v, want the project's default network only", name, s.NetworkMode, s.Networks)
		}
	}
	if n := p.Networks["default"]; n.Name != "cbx-x-1_default" || bool(n.External) || n.Labels[labels.LabelManaged] != "true" {
		t.Errorf("network default = %+v, want the sample's own, labelled", n)
	}
	if l := p.Services["container2"].Links; !slices.Equal(l, []string{"container1"}) {
		t.Errorf("container2 links = %v", l)
	}
	if a := p.Services["container1"].Networks["default"]; a == nil || !slices.Contains(a.Aliases, "first") {
		t.Errorf("container1's container_name is not an alias on the default network: %+v", a)
	}
	if s := p.Services["legacy"]; s.NetworkMode != "bridge" || len(s.Networks) != 0 {
		t.Errorf("legacy: network_mode %q networks %v, want the engine's bridge", s.NetworkMode, s.Networks)
	}
	if in.Services["container1"].NetworkMode != "bridge" || in.Networks["default"].Name != "" {
		t.Error("Normalize changed its input")
	}
	var bridged []string
	for _, a := range got {
		if a.Kind == AdaptBridgeNetwork {
			bridged = append(bridged, a.Message)
		}
	}
	want := []string{
		`service "container1": network_mode bridge runs on the sample's own bridge network "cbx-x-1_default", not the engine's shared one (links kept)`,
		`service "container2": network_mode default runs on the sample's own bridge network "cbx-x-1_default", not the engine's shared one (links kept)`,
	}
	if !slices.Equal(bridged, want) {
		t.Errorf("adaptations %q, want %q", bridged, want)
	}
	var again []Adaptation
	if _, err := Normalize(p, NormalizeOptions{Name: "cbx-x-1", OnAdapt: func(a Adaptation) { again = append(again, a) }}); err != nil || len(again) != 0 {
		t.Errorf("normalizing again: %v, %v", again, err)
	}
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

func TestAPIBefore(t *testing.T) {
	for _, tc := range []struct {
		v, min string
		want   bool
	}{
		{"1.41", "1.44", true},
		{"1.44", "1.44", false},
		{"1.45", "1.44", false},
		{"1.100", "1.44", false}, // numeric, not lexical
		{"2.0", "1.44", false},
		{"1", "1.44", true},
		{"1.44.0", "1.44", false},
	} {
		if got := apiBefore(tc.v, tc.min); got != tc.want {
			t.Errorf("apiBefore(%q, %q) = %t, want %t", tc.v, tc.min, got, tc.want)
		}
	}
}
