package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/cleanup/labels"
)

func TestErrText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{" Network p_default  Creating\n Network p_default  Error\nfailed to create network p_default: Error response from daemon: could not find an available, non-overlapping IPv4 address pool\n",
			"failed to create network p_default: Error response from daemon: could not find an available, non-overlapping IPv4 address pool"},
		{"a\nb\nc\nd\n", "b | c | d"},
		{"", ""},
	} {
		if got := errText(tc.in); got != tc.want {
			t.Errorf("errText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestVerb(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "x", "-f", "a.yaml", "-f", "b.yaml", "up", "-d"}, "docker-compose-v2 up"},
		{[]string{"exec", "ctr", "true"}, "docker-compose-v2 exec"},
		{nil, "docker-compose-v2"},
	} {
		if got := verb("docker-compose-v2", tc.args); got != tc.want {
			t.Errorf("verb(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestWriteOverride(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		info        baseInfo
		wantVersion bool
		wantPull    bool
	}{
		{baseInfo{V2: true, Version: "v2.40.3"}, false, true},
		{baseInfo{V2: false, Version: "v1.29.2"}, true, false},
	} {
		path := filepath.Join(dir, tc.info.Version+".yaml")
		if err := writeOverride(path, tc.info, []string{"default", "web"}, map[string]string{"web": "cbxbench/web:scale"}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{labels.LabelManaged + ": \"true\"", labels.LabelTask + ": " + taskCLI, "image: cbxbench/web:scale", "init: true", "networks:\n  default:\n    labels:"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s override lacks %q:\n%s", tc.info.Version, want, s)
			}
		}
		if got := strings.Contains(s, "version:"); got != tc.wantVersion {
			t.Errorf("%s override: version key present = %v, want %v", tc.info.Version, got, tc.wantVersion)
		}
		if got := strings.Contains(s, "pull_policy: never"); got != tc.wantPull {
			t.Errorf("%s override: pull_policy present = %v, want %v", tc.info.Version, got, tc.wantPull)
		}
	}
}

func TestKeptSections(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "RESULTS.md")
	if got := keptSections(p); got != "" {
		t.Fatalf("missing file: got %q, want empty", got)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# r\n\n## Results\n\nx\n\n## Server and Python client\n\ny\n")
	if got, want := keptSections(p), "\n## Server and Python client\n\ny\n"; got != want {
		t.Fatalf("api section: got %q, want %q", got, want)
	}
	write("# r\n\n## Results\n\n<!-- bench-pool:begin -->\n## Warm pools\nz\n<!-- bench-pool:end -->\n\n## Server and Python client\n\ny\n")
	want := "\n<!-- bench-pool:begin -->\n## Warm pools\nz\n<!-- bench-pool:end -->\n\n## Server and Python client\n\ny\n"
	if got := keptSections(p); got != want {
		t.Fatalf("both sections: got %q, want %q", got, want)
	}
	// The pool's own heading, its runs between markers and their reading, all in order.
	pool := "## Warm pools (`make bench-pool`)\n\nintro\n\n<!-- bench-pool:begin -->\na\n<!-- bench-pool:end -->\n\n" +
		"<!-- bench-pool-idle:begin -->\nb\n<!-- bench-pool-idle:end -->\n\n**Reading it.** c\n\n## Server and Python client\n\ny\n"
	write("# r\n\n## Results\n\nx\n\n" + pool)
	if got := keptSections(p); got != "\n"+pool {
		t.Fatalf("pool heading, runs and reading: got %q, want %q", got, "\n"+pool)
	}
	write("# r\n\n## Results\n")
	if got := keptSections(p); got != "" {
		t.Fatalf("no section: got %q, want empty", got)
	}
}

// The bare client's services are the floor project's, so that both sides of the floor do the
// same work.
func TestFloorProjectMatches(t *testing.T) {
	b, err := os.ReadFile("../projects/floor/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services map[string]struct {
			Image       string   `yaml:"image"`
			Command     []string `yaml:"command"`
			DependsOn   any      `yaml:"depends_on"`
			Healthcheck struct {
				Test     []string `yaml:"test"`
				Interval string   `yaml:"interval"`
				Timeout  string   `yaml:"timeout"`
				Retries  int      `yaml:"retries"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Services) != len(floorServices) {
		t.Fatalf("the project has %d services, the bare client %d", len(file.Services), len(floorServices))
	}
	for _, svc := range floorServices {
		s, ok := file.Services[svc.name]
		if !ok {
			t.Errorf("service %s: not in the project", svc.name)
			continue
		}
		hc := s.Healthcheck
		if s.Image != "${COMPOSEBOX_BASE_IMAGE}" || !slices.Equal(s.Command, svc.cmd) || !slices.Equal(hc.Test, svc.probe) || s.DependsOn != nil {
			t.Errorf("service %s: project has image %s, command %q, test %q, depends_on %v; the bare client runs the base image, %q, %q, no order",
				svc.name, s.Image, s.Command, hc.Test, s.DependsOn, svc.cmd, svc.probe)
		}
		if hc.Interval != floorHealthInterval.String() || hc.Timeout != floorHealthTimeout.String() || hc.Retries != floorHealthRetries {
			t.Errorf("service %s: healthcheck every %s, timeout %s, %d retries; the bare client's: %s, %s, %d",
				svc.name, hc.Interval, hc.Timeout, hc.Retries, floorHealthInterval, floorHealthTimeout, floorHealthRetries)
		}
	}
}

// The floor's figures go between their markers: before the other benchmarks' sections the
// first time, in place after that, and a full run's rewrite keeps them.
func TestWriteFloorSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := os.WriteFile(path, []byte("# results\n\nfigures\n\n"+poolSection+" (x)\n\npool\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"first run\n", "second run\n"} {
		if err := writeFloorSection(path, run); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# results\n\nfigures\n\n" + floorHeading + " (`make bench-floor`)\n\n<!-- bench-floor:begin -->\nsecond run\n<!-- bench-floor:end -->\n\n" + poolSection + " (x)\n\npool\n"
	if string(b) != want {
		t.Errorf("file:\n%s\nwant:\n%s", b, want)
	}
	if kept := keptSections(path); !strings.HasPrefix(kept, "\n"+floorHeading) || !strings.Contains(kept, "second run") || !strings.Contains(kept, poolSection) {
		t.Errorf("a full run keeps %q", kept)
	}
}

// The bare client's networks get consecutive /27s of its pool, wrapping at the end.
func TestFloorSubnets(t *testing.T) {
	b := &bareClient{next: 2046}
	var got []string
	for range 3 {
		got = append(got, b.subnet())
	}
	if want := []string{"10.219.255.192/27", "10.219.255.224/27", "10.219.0.0/27"}; !slices.Equal(got, want) {
		t.Errorf("subnets %v, want %v", got, want)
	}
}
