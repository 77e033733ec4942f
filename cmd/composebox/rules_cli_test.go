package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigComposeRules runs `composebox config` over each project of
// testdata/projects/compose-rules. A variable left blank is one warning on stderr, in the
// CLI's format, naming the flags that set it, and never compose-go's own logrus line; a rule
// that compose refuses is invalid_config with the services it concerns.
func TestConfigComposeRules(t *testing.T) {
	dir := func(name string) string {
		return filepath.Join("..", "..", "testdata", "projects", "compose-rules", name)
	}

	code, out, errOut := runConfigCLI(t, "config", dir("unset-variable"))
	if code != exitOK || !strings.Contains(out, "REGISTRY: '[]'") {
		t.Fatalf("unset-variable: exit %d\n%s%s", code, out, errOut)
	}
	if n := strings.Count(strings.TrimSpace(errOut), "\n"); n != 0 || !strings.Contains(errOut,
		`composebox: warn: variable is not set, defaulting to a blank string variable=CBX_REGISTRY`) ||
		!strings.Contains(errOut, "unset-variable/compose.yaml line=5 ") || // its use, not the comment above that names it
		!strings.Contains(errOut, `set_with="--var CBX_REGISTRY=VALUE, --env-file FILE or --pass-env CBX_REGISTRY"`) {
		t.Errorf("stderr, want one warning naming CBX_REGISTRY and its flags:\n%s", errOut)
	}
	if strings.Contains(errOut, "level=warning") || strings.Contains(errOut, "Defaulting to a blank string") {
		t.Errorf("compose-go's logrus warning reached stderr:\n%s", errOut)
	}
	code, _, errOut = runConfigCLI(t, "config", dir("unset-variable"), "--var", "CBX_REGISTRY=")
	if code != exitOK || errOut != "" {
		t.Errorf("with --var CBX_REGISTRY=: exit %d, stderr %q; want no warning", code, errOut)
	}
	code, _, errOut = runConfigCLI(t, "config", filepath.Join(dir("unset-variable"), "required.yaml"))
	if code != exitFailure || !strings.HasPrefix(errOut, "composebox: invalid_config: ") || !strings.Contains(errOut, "give the token with -e CBX_TOKEN=...") {
		t.Errorf("required: exit %d, stderr %q", code, errOut)
	}

	for _, name := range []string{"env-file-raw", "include-env-secret"} {
		if code, out, errOut := runConfigCLI(t, "config", dir(name)); code != exitOK || errOut != "" {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	for name, want := range map[string][]string{
		"duplicate-container-name": {`service "worker": container_name: app: service "web" has the same container_name`},
		"start-interval-no-period": {`service "default": healthcheck.start_interval: 1s: needs healthcheck.start_period`},
	} {
		code, _, errOut := runConfigCLI(t, "config", dir(name))
		if code != exitFailure || !strings.HasPrefix(errOut, "composebox: invalid_config: ") {
			t.Errorf("%s: exit %d, stderr %q; want invalid_config", name, code, errOut)
		}
		for _, w := range want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr %q lacks %q", name, errOut, w)
			}
		}
	}
}
