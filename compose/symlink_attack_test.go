package compose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A host file the task must not read, in shadow's format: its lines are what a parse error of
// compose-go would quote back ("additional properties 'root:...' not allowed").
const shadowSecret = "root:$6$SECRET-SHADOW-HASH-do-not-echo:19000:0:99999:7:::"

func hostSecretFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(p, []byte(shadowSecret+"\ndaemon:*:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A task directory whose compose.yaml is a symlink to a host file is refused before the file is
// read: the error names where it resolves, never what it holds. The same for Harbor's task.toml.
func TestAttackSymlinkedComposeFile(t *testing.T) {
	secret := hostSecretFile(t)
	for _, tc := range []struct {
		name  string
		files map[string]string
		link  string
	}{
		{"compose.yaml", nil, "compose.yaml"},
		{"docker-compose.yml", nil, "docker-compose.yml"},
		{"harbor environment compose file", map[string]string{"task.toml": "[task]\nname = \"x\"\n", "environment/Dockerfile": "FROM scratch\n"}, "environment/docker-compose.yaml"},
		{"harbor task.toml", map[string]string{"environment/Dockerfile": "FROM scratch\n"}, "task.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			if err := os.Symlink(secret, filepath.Join(dir, tc.link)); err != nil {
				t.Fatal(err)
			}
			_, err := loadDir(t, dir, LoadOptions{})
			if !errors.Is(err, ErrPolicyViolation) {
				t.Fatalf("err = %v, want a policy violation", err)
			}
			if strings.Contains(err.Error(), "SECRET-SHADOW") || strings.Contains(err.Error(), "daemon:") {
				t.Fatalf("the error carries the host file's contents: %v", err)
			}
			if !strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "host-path") {
				t.Errorf("err = %v, want it to name where the file resolves (%s) and the rule", err, secret)
			}
		})
	}

	// A runner who allows the directory it points into gets it read.
	shared, task := t.TempDir(), t.TempDir()
	writeFiles(t, shared, map[string]string{"compose.yaml": "services:\n  default:\n    image: busybox\n"})
	if err := os.Symlink(filepath.Join(shared, "compose.yaml"), filepath.Join(task, "compose.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := loadDir(t, task, LoadOptions{}); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("a compose file linked from a shared tree: err = %v, want a policy violation", err)
	}
	allowed := DefaultPolicy()
	allowed.AllowedMountRoots = []string{shared}
	mustLoad(t, task, LoadOptions{Policy: &allowed})
}

// The host file named as the task itself: its directory cannot be a task root, so it is not
// read either.
func TestAttackHostFileAsTask(t *testing.T) {
	f, err := os.CreateTemp("", "cbx-shadow-*.yaml") // directly in /tmp, which cannot be a root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString(shadowSecret + "\n"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, err = loadDir(t, f.Name(), LoadOptions{})
	if !errors.Is(err, ErrPolicyViolation) || strings.Contains(err.Error(), "SECRET-SHADOW") {
		t.Fatalf("err = %v, want a policy violation without the file's contents", err)
	}
	if !strings.Contains(err.Error(), "cannot be a root") {
		t.Errorf("err = %v, want it to say why its directory is no root", err)
	}
}

// A compose file inside the task that is not YAML at all is read (it is the task's own), but
// the error quotes at most a bounded piece of it.
func TestNonComposeFileIsNotEchoedWhole(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("A", 5000) + ": " + strings.Repeat("B", 100000)
	lines := make([]string, 300)
	for i := range lines {
		lines[i] = "user" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ":" + strings.Repeat("h", 60) + ":19000:0:99999:7:::"
	}
	for name, content := range map[string]string{"long": long, "lines": strings.Join(lines, "\n")} {
		writeFiles(t, dir, map[string]string{name + "/compose.yaml": content})
		_, err := loadDir(t, filepath.Join(dir, name), LoadOptions{})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%s: err = %v, want invalid_config", name, err)
		}
		if n := len(err.Error()); n > 1024 {
			t.Errorf("%s: the error is %d bytes long: %.200s...", name, n, err)
		}
		if strings.Contains(err.Error(), strings.Repeat("h", 60)) || strings.Contains(err.Error(), strings.Repeat("A", 100)) {
			t.Errorf("%s: the error quotes a whole line of the file: %v", name, err)
		}
	}
}
