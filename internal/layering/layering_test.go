package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/composebox/composebox/"

// list runs `go list` with format f on pkg.
func list(t *testing.T, f, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", f, module+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// forbidden reports the packages of got that are pkg or below one of the prefixes.
func forbidden(got []string, prefixes ...string) []string {
	var out []string
	for _, g := range got {
		for _, p := range prefixes {
			if g == p || strings.HasPrefix(g, p+"/") {
				out = append(out, g)
			}
		}
	}
	return out
}

// The Docker backend's internals, which only the Docker backend and the library that builds
// it by default may import.
var dockerInternals = []string{
	module + "lifecycle/sandboxio",
	module + "cleanup/tracking",
	module + "prereqs",
	module + "internal/subnets",
	module + "internal/engine",
}

// The CLI and the server reach the backends through the library and the one factory: no
// backend's internals among their own imports.
func TestCLIAndServerGoThroughTheLibrary(t *testing.T) {
	for _, pkg := range []string{"cmd/composebox", "api"} {
		imports := list(t, "{{join .Imports \" \"}}", pkg)
		bad := forbidden(imports, dockerInternals...)
		for _, i := range imports {
			// lifecycle itself (the Docker engine's verbs) and cleanup's removal, but not
			// cleanup/labels (the labels every backend shares).
			if i == module+"lifecycle" || i == module+"cleanup" {
				bad = append(bad, i)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s imports a backend's internals: %v", pkg, bad)
		}
	}
}

// The Kubernetes backend depends on the contract and neutral helpers only: nothing of the
// Docker backend, even indirectly (what it needs of Docker, building images, is passed in).
func TestKubernetesImportsNoDockerBackend(t *testing.T) {
	deps := list(t, "{{join .Deps \" \"}}", "kubernetes")
	if bad := forbidden(deps, append([]string{module + "lifecycle", module + "cleanup/tracking"}, dockerInternals[2:3]...)...); len(bad) > 0 {
		t.Errorf("kubernetes depends on the Docker backend: %v", bad)
	}
}

// The contract names no engine: no engine's client and no backend below it.
func TestContractNamesNoEngine(t *testing.T) {
	deps := list(t, "{{join .Deps \" \"}}", "orchestrator/backend")
	bad := forbidden(deps, "github.com/docker/docker", "k8s.io", module+"lifecycle", module+"kubernetes", module+"cleanup/tracking", module+"prereqs")
	if len(bad) > 0 {
		t.Errorf("orchestrator/backend depends on an engine: %v", bad)
	}
}

// The contract's own imports are the standard library and the few neutral packages its types
// are made of: a backend is added by implementing it, never by the contract learning of it.
func TestContractImportsOnlyNeutralPackages(t *testing.T) {
	allowed := []string{"github.com/compose-spec/compose-go/v2/types", module + "cleanup/labels", module + "internal/errdefs"}
	for _, i := range list(t, "{{join .Imports \" \"}}", "orchestrator/backend") {
		if strings.Contains(strings.SplitN(i, "/", 2)[0], ".") && !slices.Contains(allowed, i) {
			t.Errorf("orchestrator/backend imports %s, which is neither standard nor neutral", i)
		}
	}
}
