package compose

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// Source says which resolution case applied (see Resolve).
type Source string

const (
	SourceFile       Source = "file"       // an explicit compose file, or one found in a directory
	SourceDirectory  Source = "directory"  // a directory holding one of the four compose file names
	SourceDockerfile Source = "dockerfile" // a lone Dockerfile: a generated one-service project
	SourceDefault    Source = "default"    // nothing: a generated project on the default image
	SourceInline     Source = "inline"     // a project given in Go, as YAML text or as a struct
)

// composeFileNames are the names looked for in a directory, in order.
var composeFileNames = []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"}

// NoDefaultImage as ResolveOptions.DefaultImage means there is no default image: resolving
// nothing, or a directory with neither a compose file nor a Dockerfile, is then an error.
const NoDefaultImage = "-"

// Resolution is the outcome of Resolve, FromYAML or FromProject: which case applied, why, and
// everything Load needs. Generated and inline projects are held here, in memory; nothing is ever
// written next to the user's files.
type Resolution struct {
	Source Source
	// Reason is one human sentence saying why this case applied.
	Reason string
	// Files are the absolute compose files, in -f order. Empty for generated and inline projects.
	Files []string
	// Dockerfile is the absolute Dockerfile of a SourceDockerfile project.
	Dockerfile string
	// WorkingDir is the absolute project directory: the task directory, or the Dockerfile's
	// directory for a generated project. Relative paths and .env resolve against it.
	WorkingDir string
	// Image is the image of a SourceDefault project.
	Image string
	// YAML is the text of a project given by FromYAML.
	YAML []byte
	// Project is the project given by FromProject (a deep copy of the caller's).
	Project *types.Project

	// Layout is the suite convention the path follows, if Resolve recognised one.
	Layout Layout
	// TaskName is the task's name as the layout gives it (Harbor's [task] name, the
	// Terminal-Bench task id), else its directory's (TaskNameOf). Empty for inline projects.
	TaskName string
	// DefaultService is the layout's default service: Harbor's main, Terminal-Bench's client.
	// It applies when the project has that service and nothing else chooses.
	DefaultService string
	// Env are the variables the layout's harness would set (Terminal-Bench's in-container
	// paths, Harbor's build directory, limits and log paths), under the caller's own.
	Env map[string]string
	// EgressOff is the layout's word that the task has no route out (Harbor's
	// allow_internet = false): the task's policy then cuts egress (Policy.EgressOff).
	EgressOff bool

	// harborMain is the service main of a Harbor task, as Harbor's base file defines it.
	harborMain map[string]any
}

// ResolveOptions tune Resolve. The zero value is the default behaviour.
type ResolveOptions struct {
	// DefaultImage runs a project resolved from nothing. Empty means the base image composebox
	// builds itself (imagespec.BaseRef(imagespec.DefaultBusybox)); NoDefaultImage means none.
	DefaultImage string
	// ExtraFiles are more compose files merged on top, like further -f flags. They are only
	// valid when the path resolves to a compose file.
	ExtraFiles []string
}

// Resolve decides how to run path: a suite's task directory (a Harbor task:
// task.toml and environment/; a Terminal-Bench task: task.yaml beside a compose file), an
// explicit compose file (any name), a directory holding compose.yaml, compose.yml,
// docker-compose.yaml or docker-compose.yml (first found wins), a lone Dockerfile (Dockerfile,
// Dockerfile.x, x.Dockerfile, or a directory whose only config is one of those), or nothing
// (path "", or a directory without any config) on the default image. Errors are
// ErrInvalidConfig.
func Resolve(path string, opts ResolveOptions) (*Resolution, error) {
	r, err := resolve(path, opts)
	if err != nil {
		return nil, err
	}
	if r.TaskName == "" {
		r.TaskName = TaskNameOf(r.WorkingDir)
	}
	if len(opts.ExtraFiles) > 0 {
		if r.Source != SourceFile && r.Source != SourceDirectory {
			return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
				"resolve %s: extra compose files need a compose file to merge into, but %s", displayPath(path), r.Reason))
		}
		for _, f := range opts.ExtraFiles {
			abs, err := existingFile(f)
			if err != nil {
				return nil, err
			}
			r.Files = append(r.Files, abs)
		}
		r.Reason += fmt.Sprintf(", merged with %d more file(s)", len(opts.ExtraFiles))
	}
	return r, nil
}

func resolve(path string, opts ResolveOptions) (*Resolution, error) {
	if path == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("resolve: working directory: %w", err)
		}
		return defaultResolution(wd, "no path given", opts)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "resolve "+path)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("resolve %s: no such file or directory", abs))
		}
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "resolve "+abs)
	}
	if r, ok, err := resolveLayout(abs, fi.IsDir()); err != nil || ok {
		return r, err
	}
	if !fi.IsDir() {
		if IsDockerfileName(filepath.Base(abs)) {
			return &Resolution{
				Source:     SourceDockerfile,
				Reason:     fmt.Sprintf("%s is a Dockerfile", abs),
				Dockerfile: abs,
				WorkingDir: filepath.Dir(abs),
			}, nil
		}
		return &Resolution{
			Source:     SourceFile,
			Reason:     fmt.Sprintf("%s is a compose file", abs),
			Files:      []string{abs},
			WorkingDir: filepath.Dir(abs),
		}, nil
	}

	var found []string
	for _, name := range composeFileNames {
		f := filepath.Join(abs, name)
		if st, err := os.Stat(f); err == nil && !st.IsDir() {
			found = append(found, name)
		}
	}
	if len(found) > 0 {
		reason := fmt.Sprintf("found %s in %s", found[0], abs)
		if len(found) > 1 {
			reason += fmt.Sprintf(" (ignoring %s)", strings.Join(found[1:], ", "))
		}
		r := &Resolution{
			Source:     SourceDirectory,
			Reason:     reason,
			Files:      []string{filepath.Join(abs, found[0])},
			WorkingDir: abs,
		}
		markInspect(r)
		return r, nil
	}

	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "resolve "+abs)
	}
	var dockerfiles []string
	for _, e := range entries {
		if IsDockerfileName(e.Name()) && !e.IsDir() {
			dockerfiles = append(dockerfiles, e.Name())
		}
	}
	switch len(dockerfiles) {
	case 0:
		return defaultResolution(abs, fmt.Sprintf("no compose file or Dockerfile in %s", abs), opts)
	case 1:
		return &Resolution{
			Source:     SourceDockerfile,
			Reason:     fmt.Sprintf("found only %s in %s", dockerfiles[0], abs),
			Dockerfile: filepath.Join(abs, dockerfiles[0]),
			WorkingDir: abs,
		}, nil
	default:
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"resolve %s: no compose file and %d Dockerfiles (%s): name one explicitly",
			abs, len(dockerfiles), strings.Join(dockerfiles, ", ")))
	}
}

func defaultResolution(dir, why string, opts ResolveOptions) (*Resolution, error) {
	img := opts.DefaultImage
	switch img {
	case NoDefaultImage:
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"resolve %s: %s and no default image is configured: add a compose.yaml or a Dockerfile", dir, why))
	case "":
		ref, err := imagespec.BaseRef(imagespec.DefaultBusybox)
		if err != nil {
			return nil, errdefs.Wrap(errdefs.ErrPrerequisite, err, "resolve default image")
		}
		img = ref
	}
	return &Resolution{
		Source:     SourceDefault,
		Reason:     fmt.Sprintf("%s: using the default image %s", why, img),
		WorkingDir: dir,
		Image:      img,
	}, nil
}

// IsDockerfileName reports whether a file name is one Resolve treats as a Dockerfile:
// "Dockerfile", "Dockerfile.<x>" or "<x>.Dockerfile".
func IsDockerfileName(name string) bool {
	return name == "Dockerfile" ||
		(strings.HasPrefix(name, "Dockerfile.") && len(name) > len("Dockerfile.")) ||
		(strings.HasSuffix(name, ".Dockerfile") && len(name) > len(".Dockerfile"))
}

// FromYAML is a project given as compose YAML text. workingDir is its project directory (""
// means the current directory): relative paths and .env resolve against it.
func FromYAML(yaml []byte, workingDir string) *Resolution {
	return &Resolution{
		Source:     SourceInline,
		Reason:     fmt.Sprintf("compose YAML given in Go (%d bytes)", len(yaml)),
		WorkingDir: absOrEmpty(workingDir),
		YAML:       slices.Clone(yaml),
	}
}

// FromProject is a project given as a compose-go struct. Load validates and normalises a copy
// through compose-go, without interpolation: the values are taken as they are.
func FromProject(p *types.Project) *Resolution {
	r := &Resolution{Source: SourceInline, Reason: "compose project given in Go as a struct"}
	if p != nil {
		r.Project = p.WithServicesDisabled() // a deep copy: the caller may go on changing p
		r.WorkingDir = absOrEmpty(p.WorkingDir)
	}
	return r
}

func absOrEmpty(dir string) string {
	if dir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

func existingFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", errdefs.Wrap(ErrInvalidConfig, err, "resolve "+path)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errdefs.New(ErrInvalidConfig, fmt.Sprintf("resolve %s: no such file", abs))
	case err != nil:
		return "", errdefs.Wrap(ErrInvalidConfig, err, "resolve "+abs)
	case fi.IsDir():
		return "", errdefs.New(ErrInvalidConfig, fmt.Sprintf("resolve %s: is a directory, want a compose file", abs))
	}
	return abs, nil
}

func displayPath(p string) string {
	if p == "" {
		return "(nothing)"
	}
	return p
}
