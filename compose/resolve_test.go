package compose

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// writeFiles creates files (name -> content) under dir; a name ending in "/" is a directory.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestResolve(t *testing.T) {
	const img = "example/default:1"
	tests := []struct {
		name       string
		files      map[string]string
		path       string // relative to the temp dir; "" stays ""
		opts       ResolveOptions
		source     Source
		file       string // base name of Files[0]
		dockerfile string // base name of Dockerfile
		reason     string // substring of Reason
		wantErr    string // substring of the error
	}{
		{name: "explicit file any name", files: map[string]string{"task.yml": "services: {}"}, path: "task.yml",
			source: SourceFile, file: "task.yml", reason: "is a compose file"},
		{name: "dir compose.yaml first", files: map[string]string{"compose.yaml": "", "compose.yml": "", "docker-compose.yaml": "", "docker-compose.yml": "", "Dockerfile": ""},
			path: ".", source: SourceDirectory, file: "compose.yaml", reason: "found compose.yaml in"},
		{name: "dir compose.yml second", files: map[string]string{"compose.yml": "", "docker-compose.yaml": "", "docker-compose.yml": ""},
			path: ".", source: SourceDirectory, file: "compose.yml", reason: "ignoring docker-compose.yaml, docker-compose.yml"},
		{name: "dir docker-compose.yaml third", files: map[string]string{"docker-compose.yaml": "", "docker-compose.yml": ""},
			path: ".", source: SourceDirectory, file: "docker-compose.yaml"},
		{name: "dir docker-compose.yml fourth", files: map[string]string{"docker-compose.yml": ""},
			path: ".", source: SourceDirectory, file: "docker-compose.yml"},
		{name: "explicit Dockerfile", files: map[string]string{"Dockerfile": "FROM x"}, path: "Dockerfile",
			source: SourceDockerfile, dockerfile: "Dockerfile", reason: "is a Dockerfile"},
		{name: "explicit Dockerfile.x", files: map[string]string{"Dockerfile.gpu": "FROM x"}, path: "Dockerfile.gpu",
			source: SourceDockerfile, dockerfile: "Dockerfile.gpu"},
		{name: "explicit x.Dockerfile", files: map[string]string{"web.Dockerfile": "FROM x"}, path: "web.Dockerfile",
			source: SourceDockerfile, dockerfile: "web.Dockerfile"},
		{name: "dir with only a Dockerfile", files: map[string]string{"Dockerfile": "FROM x", "README": ""}, path: ".",
			source: SourceDockerfile, dockerfile: "Dockerfile", reason: "found only Dockerfile"},
		{name: "dir with only x.Dockerfile", files: map[string]string{"app.Dockerfile": "FROM x"}, path: ".",
			source: SourceDockerfile, dockerfile: "app.Dockerfile"},
		{name: "dir with two Dockerfiles", files: map[string]string{"Dockerfile": "", "Dockerfile.dev": ""}, path: ".",
			wantErr: "2 Dockerfiles (Dockerfile, Dockerfile.dev): name one explicitly"},
		{name: "empty dir uses the default image", files: map[string]string{"notes.txt": ""}, path: ".",
			opts: ResolveOptions{DefaultImage: img}, source: SourceDefault, reason: "no compose file or Dockerfile in"},
		{name: "empty dir without a default image", files: map[string]string{"sub/": ""}, path: ".",
			opts: ResolveOptions{DefaultImage: NoDefaultImage}, wantErr: "no default image is configured"},
		{name: "nothing uses the default image", path: "", opts: ResolveOptions{DefaultImage: img},
			source: SourceDefault, reason: "no path given: using the default image " + img},
		{name: "nothing without a default image", path: "", opts: ResolveOptions{DefaultImage: NoDefaultImage},
			wantErr: "no default image is configured"},
		{name: "missing path", path: "nope.yaml", wantErr: "no such file or directory"},
		{name: "extra files", files: map[string]string{"compose.yaml": "", "override.yaml": ""}, path: ".",
			opts: ResolveOptions{ExtraFiles: []string{"override.yaml"}}, source: SourceDirectory, file: "compose.yaml",
			reason: "merged with 1 more file"},
		{name: "missing extra file", files: map[string]string{"compose.yaml": ""}, path: ".",
			opts: ResolveOptions{ExtraFiles: []string{"nope.yaml"}}, wantErr: "no such file"},
		{name: "extra files need a compose file", files: map[string]string{"Dockerfile": "", "override.yaml": ""}, path: ".",
			opts: ResolveOptions{ExtraFiles: []string{"override.yaml"}}, wantErr: "extra compose files need a compose file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			t.Chdir(dir) // "" resolves against the working directory, extra files too
			r, err := Resolve(tt.path, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve error = %v, want one containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("Resolve error %v is not ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if r.Source != tt.source {
				t.Errorf("Source = %q, want %q", r.Source, tt.source)
			}
			if !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("Reason = %q, want it to contain %q", r.Reason, tt.reason)
			}
			if !filepath.IsAbs(r.WorkingDir) {
				t.Errorf("WorkingDir %q is not absolute", r.WorkingDir)
			}
			if tt.file != "" {
				if len(r.Files) == 0 || filepath.Base(r.Files[0]) != tt.file || !filepath.IsAbs(r.Files[0]) {
					t.Errorf("Files = %v, want an absolute %s first", r.Files, tt.file)
				}
				if len(r.Files) != 1+len(tt.opts.ExtraFiles) {
					t.Errorf("Files = %v, want %d", r.Files, 1+len(tt.opts.ExtraFiles))
				}
			}
			if tt.dockerfile != "" {
				if filepath.Base(r.Dockerfile) != tt.dockerfile || !filepath.IsAbs(r.Dockerfile) {
					t.Errorf("Dockerfile = %q, want an absolute %s", r.Dockerfile, tt.dockerfile)
				}
				if r.WorkingDir != filepath.Dir(r.Dockerfile) {
					t.Errorf("WorkingDir = %q, want the Dockerfile's directory", r.WorkingDir)
				}
			}
			if tt.source == SourceDefault && r.Image != img {
				t.Errorf("Image = %q, want %q", r.Image, img)
			}
		})
	}
}

func TestResolveDefaultImageIsBase(t *testing.T) {
	r, err := Resolve(t.TempDir(), ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != SourceDefault || !strings.HasPrefix(r.Image, "composebox/base:") {
		t.Errorf("Resolve(empty dir) = %s %q, want the base image", r.Source, r.Image)
	}
}

func TestIsDockerfileName(t *testing.T) {
	for name, want := range map[string]bool{
		"Dockerfile": true, "Dockerfile.dev": true, "web.Dockerfile": true,
		"Dockerfile.": false, ".Dockerfile": false, "dockerfile": false, "Dockerfiles": false,
		"compose.yaml": false, "MyDockerfile": false,
	} {
		if got := IsDockerfileName(name); got != want {
			t.Errorf("IsDockerfileName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestFromProjectCopies(t *testing.T) {
	p := &types.Project{Name: "x", WorkingDir: "/tmp", Services: types.Services{
		"default": {Name: "default", Image: "a"},
	}}
	r := FromProject(p)
	p.Services["default"] = types.ServiceConfig{Name: "default", Image: "changed"}
	if got := r.Project.Services["default"].Image; got != "a" {
		t.Errorf("FromProject kept a reference: image %q after the caller changed it", got)
	}
	if r.Source != SourceInline || r.WorkingDir != "/tmp" {
		t.Errorf("FromProject = %s %q", r.Source, r.WorkingDir)
	}
}
