package compose

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad feeds arbitrary YAML through load, policy and normalisation. Nothing may panic or
// hang, and every failure must be one of the package's categories. Run it with
//
//	go test ./compose -run '^$' -fuzz FuzzLoad -fuzztime 2m
//
// The seed corpus is every compose file under testdata/projects; crashers land in
// testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	err := filepath.WalkDir(projectsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil {
			f.Add(data)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"x-c: &c {image: busybox}\nservices:\n  default:\n    <<: *c\n    volumes: ['./data:/data', '/etc:/etc']\n",
		"services:\n  default:\n    build: .\n    healthcheck: {test: [CMD, 'true'], start_period: 1s, start_interval: 1s}\n",
		"services:\n  a: {image: x, x-default: true, networks: [n], security_opt: ['seccomp:unconfined']}\n  b: {image: y, cap_add: [cap_sys_admin]}\nnetworks: {n: {}}\n",
		"services:\n  default:\n    image: ${SAMPLE_METADATA_KEY:-x}\n    environment: [SAMPLE_METADATA_KEY]\n",
	} {
		f.Add([]byte(s))
	}

	dir := f.TempDir()
	for name, content := range map[string]string{"Dockerfile": "FROM scratch\n", "sub/Dockerfile": "FROM scratch\n", "data/x": ""} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	opts := LoadOptions{
		Environment: map[string]string{BaseImageEnv: "composebox/base:fuzz"},
		Metadata:    map[string]string{"key": "value"},
	}
	created := time.Unix(1_800_000_000, 0)

	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(t.Context(), FromYAML(data, dir), opts)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrPolicyViolation) {
				t.Fatalf("Load error is neither ErrInvalidConfig nor ErrPolicyViolation: %v", err)
			}
			return
		}
		if _, err := ServiceOrder(p); err != nil {
			t.Fatalf("Load accepted a project without a default service: %v", err)
		}
		n, err := Normalize(p, NormalizeOptions{
			Name: "cbx-fuzz-00000000", Task: "fuzz", Sample: "00000000", Owner: "fuzz", Created: created, APIVersion: "1.41",
		})
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Normalize error is not ErrInvalidConfig: %v", err)
			}
			return
		}
		Policy{Memory: 1 << 30, CPUs: 1, Pids: 256, EgressOff: true}.ApplyDefaults(n)
		if _, err := n.MarshalYAML(); err != nil {
			t.Fatalf("marshal normalised project: %v", err)
		}
	})
}
