package compose

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Two services with one container_name are refused, naming both; each further one (in name
// order) names the first. The same container_name in a profile that is not enabled is no clash.
func TestContainerNameUnique(t *testing.T) {
	yml := `services:
  default: {image: busybox}
  web: {image: busybox, container_name: app}
  worker: {image: busybox, container_name: app}
  cron: {image: busybox, container_name: app}
  other: {image: busybox, container_name: other}
  later: {image: busybox, container_name: other, profiles: [later]}
`
	_, err := Load(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{})
	var got []string
	for _, v := range problemsOf(t, err) {
		got = append(got, v.String())
	}
	want := []string{
		`service "web": container_name: app: service "cron" has the same container_name: two containers cannot have one name`,
		`service "worker": container_name: app: service "cron" has the same container_name: two containers cannot have one name`,
	}
	if !slices.Equal(got, want) || !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// start_interval without start_period is refused before normalisation would drop it for an old
// engine; with a start_period it is dropped there, as before.
func TestStartIntervalValidatedBeforeStripped(t *testing.T) {
	r, err := Resolve(filepath.Join(rulesDir, "start-interval-no-period"), ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range []string{"1.41", "1.44", ""} {
		_, err := Prepare(t.Context(), r, LoadOptions{}, NormalizeOptions{APIVersion: api})
		checkInvalid(t, err, `service "default": healthcheck.start_interval: 1s: needs healthcheck.start_period`)
	}
	yml := "services:\n  default:\n    image: busybox\n    healthcheck: {test: [CMD, 'true'], start_period: 5s, start_interval: 1s}\n"
	p, err := Prepare(t.Context(), FromYAML([]byte(yml), t.TempDir()), LoadOptions{}, NormalizeOptions{APIVersion: "1.41"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Normalize(p, NormalizeOptions{APIVersion: "1.41"})
	if err != nil || n.Services["default"].HealthCheck.StartInterval != nil {
		t.Errorf("normalised for API 1.41: %v, start_interval %v; want it dropped", err, n.Services["default"].HealthCheck.StartInterval)
	}
}
