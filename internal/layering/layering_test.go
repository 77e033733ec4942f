package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// The orchestrator's public API names no engine: one file of it, docker.go, builds the
// default backend (the environment's Docker Engine) and keeps the deprecated Docker options;
// no other file imports Docker's client or a Docker backend.
func TestOrchestratorNamesDockerInOnePlace(t *testing.T) {
	docker := []string{"github.com/docker/docker", module + "lifecycle/dockerbackend", module + "lifecycle/dockerenv",
		module + "lifecycle/multiengine", module + "internal/subnets", module + "lifecycle/sandboxio"}
	dir := list(t, "{{.Dir}}", "orchestrator")[0]
	for _, f := range list(t, "{{join .GoFiles \" \"}}", "orchestrator") {
		if f == "docker.go" {
			continue
		}
		if bad := forbidden(imports(t, filepath.Join(dir, f)), docker...); len(bad) > 0 {
			t.Errorf("orchestrator/%s imports %v: only docker.go, which builds the default backend, may", f, bad)
		}
	}
}

// The CLI and the server build their backend with the factory (orchestrator/backends) and give
// it WithBackend: they import no Docker backend nor Docker's client, and use none of the
// orchestrator's deprecated Docker options.
func TestCLIAndServerBuildBackendsWithTheFactory(t *testing.T) {
	deprecated := map[string]bool{"WithSubnets": true, "WithEngines": true, "WithClient": true, "EngineConfig": true,
		"Subnets": true, "ParseSubnetPool": true}
	for _, pkg := range []string{"cmd/composebox", "api"} {
		imports := list(t, "{{join .Imports \" \"}}", pkg)
		if bad := forbidden(imports, "github.com/docker/docker", module+"lifecycle/dockerbackend", module+"lifecycle/dockerenv", module+"lifecycle/multiengine"); len(bad) > 0 {
			t.Errorf("%s imports %v: it builds its backend with orchestrator/backends", pkg, bad)
		}
		dir := list(t, "{{.Dir}}", pkg)[0]
		for _, f := range list(t, "{{join .GoFiles \" \"}}", pkg) {
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, f), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "orchestrator" && deprecated[sel.Sel.Name] {
						t.Errorf("%s/%s uses orchestrator.%s, which is deprecated: the backend's options go to orchestrator/backends", pkg, f, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// imports are the import paths of the Go file at path.
func imports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range f.Imports {
		p, err := strconv.Unquote(i.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
