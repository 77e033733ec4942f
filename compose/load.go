package compose

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images"
)

// BaseImageEnv is the variable through which compose files name composebox's base image, whose
// tag is a content hash: `image: ${COMPOSEBOX_BASE_IMAGE}`, or a build arg for `FROM $BASE`.
// Load sets it from images.BaseRef unless the environment already has it.
const BaseImageEnv = "COMPOSEBOX_BASE_IMAGE"

// MetadataPrefix starts the variable a sample's metadata key is interpolated through.
const MetadataPrefix = "SAMPLE_METADATA_"

// Keep-alive and stop settings of generated projects and of services that set none.
var keepAlive = []string{"tail", "-f", "/dev/null"}

const defaultStopGrace = "1s"

// LoadOptions tune Load. The zero value loads with the process environment and .env.
type LoadOptions struct {
	// Environment overrides, on top of the process environment and the project's .env file.
	Environment map[string]string
	// Profiles to enable. Empty means COMPOSE_PROFILES from the environment, if set.
	Profiles []string
	// Metadata is the sample's metadata. SAMPLE_METADATA_<KEY> (key upper-cased, anything
	// but letters, digits and '_' turned into '_') is set only for the keys the files reference.
	Metadata map[string]string
	// Name is the project name seen while loading, as ${COMPOSE_PROJECT_NAME}. Empty means the
	// project directory's base name. Normalize sets the per-sample name afterwards either way.
	Name string
	// Limits bound the input (file size, alias expansion); zero fields take the defaults.
	Limits Limits
	// Logger receives warnings such as unset variables. Default: discard.
	Logger *slog.Logger
}

// Load reads the resolved project through compose-go: interpolation from the environment and
// .env, profiles, extends, include and every -f file merged in order. Generated and inline
// projects are loaded from memory. Load also checks that build contexts and Dockerfiles exist
// and that a default service can be chosen. Every error is ErrInvalidConfig and names the file,
// and the line when it is known.
func Load(ctx context.Context, r *Resolution, opts LoadOptions) (*types.Project, error) {
	if r == nil {
		return nil, errdefs.New(ErrInvalidConfig, "load: no resolution given")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wd := r.WorkingDir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("load: working directory: %w", err)
		}
	}
	env, err := loadEnvironment(wd, opts.Environment)
	if err != nil {
		return nil, err
	}

	set := &fileSet{lim: opts.Limits.withDefaults(), docs: map[string][]*yaml.Node{}, content: map[string][]byte{}}
	details := types.ConfigDetails{WorkingDir: wd, Environment: env}
	interpolate := true
	switch r.Source {
	case SourceFile, SourceDirectory:
		if len(r.Files) == 0 {
			return nil, errdefs.New(ErrInvalidConfig, "load: resolution names no compose file")
		}
		for _, f := range r.Files {
			data, err := set.read(f)
			if err != nil {
				return nil, err
			}
			details.ConfigFiles = append(details.ConfigFiles, types.ConfigFile{Filename: f, Content: data})
		}
	case SourceInline:
		switch {
		case r.YAML != nil:
			if err := set.add(inlineName, r.YAML); err != nil {
				return nil, err
			}
			details.ConfigFiles = []types.ConfigFile{{Filename: inlineName, Content: r.YAML}}
		case r.Project != nil:
			cfg, err := projectModel(r.Project)
			if err != nil {
				return nil, err
			}
			details.ConfigFiles = []types.ConfigFile{{Filename: structName, Config: cfg}}
			interpolate = false // a struct's values are final; "$" in them is literal
		default:
			return nil, errdefs.New(ErrInvalidConfig, "load: inline resolution holds neither YAML nor a project")
		}
	case SourceDockerfile, SourceDefault:
		details.ConfigFiles = []types.ConfigFile{{Filename: generatedName(r), Config: generatedModel(r, env)}}
		interpolate = false // paths and image names are taken literally
	default:
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load: unknown resolution source %q", r.Source))
	}
	if interpolate {
		if err := set.followReferences(wd, env); err != nil {
			return nil, err
		}
		for k, v := range opts.Metadata {
			name := MetadataVar(k)
			if set.references(name) {
				env[name] = v
			}
		}
	}

	name := opts.Name
	if name == "" && r.Project != nil {
		name = r.Project.Name
	}
	if name == "" {
		name = loader.NormalizeProjectName(filepath.Base(wd))
	}
	if name == "" {
		name = "composebox"
	}
	if loader.NormalizeProjectName(name) != name {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf(
			"load: invalid project name %q: use lowercase letters, digits, '-' and '_', starting with a letter or digit", name))
	}
	profiles := opts.Profiles
	if len(profiles) == 0 {
		for p := range strings.SplitSeq(env["COMPOSE_PROFILES"], ",") {
			if p = strings.TrimSpace(p); p != "" {
				profiles = append(profiles, p)
			}
		}
	}

	unset := map[string]bool{}
	proj, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(name, true)
		o.Profiles = profiles
		o.SkipInterpolation = !interpolate
		if o.Interpolate != nil {
			ip := *o.Interpolate
			ip.Substitute = quietSubstitute(unset)
			o.Interpolate = &ip
		}
	})
	for _, v := range slices.Sorted(maps.Keys(unset)) {
		log.Warn("variable is not set, defaulting to a blank string", "variable", v)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("load: %w", ctx.Err())
		}
		return nil, set.wrap(err, details.ConfigFiles)
	}
	proj.ComposeFiles = slices.Clone(r.Files)
	if err := checkBuilds(proj, set); err != nil {
		return nil, err
	}
	if _, err := DefaultService(proj); err != nil {
		return nil, &loadError{msg: "load " + describeFiles(details.ConfigFiles) + ": " + err.Error(), cause: err}
	}
	return proj, nil
}

// Names standing in for a file in messages about projects that have none.
const (
	inlineName = "inline compose YAML"
	structName = "compose project struct"
)

func generatedName(r *Resolution) string {
	if r.Source == SourceDockerfile {
		return r.Dockerfile
	}
	return "generated project on " + r.Image
}

// generatedModel is the one-service project of CONTRACT section 1, cases 3 and 4. A generated
// build gets the base image as the build arg COMPOSEBOX_BASE_IMAGE, so that a lone Dockerfile
// can start with `ARG COMPOSEBOX_BASE_IMAGE` and `FROM ${COMPOSEBOX_BASE_IMAGE}`: its tag is a
// content hash that no Dockerfile could spell.
func generatedModel(r *Resolution, env types.Mapping) map[string]any {
	svc := map[string]any{
		"command":           []any{keepAlive[0], keepAlive[1], keepAlive[2]},
		"init":              true,
		"network_mode":      "none",
		"stop_grace_period": defaultStopGrace,
	}
	if r.Source == SourceDockerfile {
		build := map[string]any{
			"context":    filepath.Dir(r.Dockerfile),
			"dockerfile": filepath.Base(r.Dockerfile),
		}
		if base, ok := env[BaseImageEnv]; ok {
			build["args"] = map[string]any{BaseImageEnv: base}
		}
		svc["build"] = build
	} else {
		svc["image"] = r.Image
	}
	return map[string]any{"services": map[string]any{DefaultServiceName: svc}}
}

// projectModel turns a struct back into the generic model compose-go loads, so that a project
// given in Go is validated and normalised exactly like a file.
func projectModel(p *types.Project) (map[string]any, error) {
	b, err := p.MarshalYAML()
	if err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "load "+structName)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, errdefs.Wrap(ErrInvalidConfig, err, "load "+structName)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// MetadataVar is the variable a metadata key is interpolated through: "difficulty level"
// gives SAMPLE_METADATA_DIFFICULTY_LEVEL.
func MetadataVar(key string) string {
	b := []byte(strings.ToUpper(key))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return MetadataPrefix + string(b)
}

// loadEnvironment is the process environment with overrides on top, then .env for what is still
// unset, as the compose CLI does, and the base image reference.
func loadEnvironment(wd string, overrides map[string]string) (types.Mapping, error) {
	env := types.Mapping{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	maps.Copy(env, overrides)
	if disabled, _ := strconv.ParseBool(env["COMPOSE_DISABLE_ENV_FILE"]); !disabled {
		dotEnv := filepath.Join(wd, ".env")
		if fi, err := os.Stat(dotEnv); err == nil && fi.Mode().IsRegular() {
			if fi.Size() > defaultLimits.MaxFileSize {
				return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: file is larger than the %s limit",
					dotEnv, byteSize(defaultLimits.MaxFileSize)))
			}
			vars, err := dotenv.GetEnvFromFile(env, []string{dotEnv})
			if err != nil {
				return nil, &loadError{msg: fmt.Sprintf("load %s: %v", dotEnv, err), cause: err}
			}
			env.Merge(vars)
		}
	}
	if _, ok := env[BaseImageEnv]; !ok {
		// Without busybox there is no base image; a file that needs it fails on the blank value.
		if ref, err := images.BaseRef(images.DefaultBusybox); err == nil {
			env[BaseImageEnv] = ref
		}
	}
	return env, nil
}

func quietSubstitute(unset map[string]bool) func(string, template.Mapping) (string, error) {
	replace := func(sub string, m template.Mapping, cfg *template.Config) (string, error) {
		v, applied, err := template.DefaultReplacementAppliedFunc(sub, m, cfg)
		if err == nil && !applied {
			unset[strings.Trim(sub, "${}")] = true
		}
		return v, err
	}
	return func(s string, m template.Mapping) (string, error) {
		return template.SubstituteWithOptions(s, m, template.WithoutLogging, template.WithReplacementFunction(replace))
	}
}

// fileSet holds every file a load reads, parsed once to check the limits, to follow extends and
// include, to find metadata references and to put line numbers on errors.
type fileSet struct {
	lim     Limits
	order   []string
	docs    map[string][]*yaml.Node
	content map[string][]byte
}

func (s *fileSet) read(path string) ([]byte, error) {
	if len(s.order) >= s.lim.MaxFiles {
		return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: more than %d files through -f, extends and include", path, s.lim.MaxFiles))
	}
	data, err := readLimited(path, s.lim.MaxFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: no such file", path))
		}
		return nil, &loadError{msg: fmt.Sprintf("load %s: %v", path, err), cause: err}
	}
	return data, s.add(path, data)
}

func (s *fileSet) add(name string, data []byte) error {
	docs, err := parseYAML(data, s.lim)
	if err != nil {
		return &loadError{msg: fmt.Sprintf("load %s: %v", name, err), cause: err}
	}
	s.order = append(s.order, name)
	s.docs[name] = docs
	s.content[name] = data
	return nil
}

// followReferences checks, within the limits, the files that extends, include, env_file and
// label_file pull in, before compose-go reads them itself (in full, whatever they are: a FIFO or
// /dev/zero would never end). compose-go resolves a relative path against the project directory
// or the including file's, so both are checked.
func (s *fileSet) followReferences(wd string, env types.Mapping) error {
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for i := 0; i < len(s.order); i++ {
		from := s.order[i]
		for _, ref := range referencedFiles(s.docs[from]) {
			p := ref.path
			if v, err := template.SubstituteWithOptions(p, lookup, template.WithoutLogging); err == nil {
				p = v
			}
			cands := []string{p}
			if !filepath.IsAbs(p) {
				cands = []string{filepath.Join(wd, p)}
				if filepath.IsAbs(from) {
					cands = append(cands, filepath.Join(filepath.Dir(from), p))
				}
			}
			for _, c := range cands {
				if _, seen := s.docs[c]; seen {
					continue
				}
				fi, err := os.Stat(c)
				switch {
				case err != nil:
					continue // compose-go reports a missing one with its own message
				case !fi.Mode().IsRegular():
					return errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: %s is not a regular file", from, c))
				case !ref.yaml && fi.Size() > s.lim.MaxFileSize:
					return errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: %s is larger than the %s limit",
						from, c, byteSize(s.lim.MaxFileSize)))
				case ref.yaml:
					if _, err := s.read(c); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// references reports whether any file mentions the variable name as a whole word.
func (s *fileSet) references(name string) bool {
	for _, data := range s.content {
		for rest := data; ; {
			i := strings.Index(string(rest), name)
			if i < 0 {
				break
			}
			end := i + len(name)
			if end >= len(rest) || !isWordByte(rest[end]) {
				if i == 0 || !isWordByte(rest[i-1]) {
					return true
				}
			}
			rest = rest[end:]
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

var reFilePrefix = regexp.MustCompile(`^(?:validating|failed to parse|failed to read file) ("?)(.+?)("?): `)

// wrap turns a compose-go error into ErrInvalidConfig naming the file and, when it can be found,
// the line.
func (s *fileSet) wrap(err error, files []types.ConfigFile) error {
	msg := err.Error()
	file := ""
	if m := reFilePrefix.FindStringSubmatch(msg); m != nil {
		file, msg = m[2], msg[len(m[0]):]
	}
	msg = strings.TrimSpace(msg)
	line := 0
	if file != "" {
		line = locate(s.docs[file], msg)
	} else {
		// Later files override earlier ones, so the last one with the path is the likeliest.
		for i := len(s.order) - 1; i >= 0 && line == 0; i-- {
			if l := locate(s.docs[s.order[i]], msg); l > 0 {
				file, line = s.order[i], l
			}
		}
	}
	if file == "" {
		file = describeFiles(files)
	}
	out := "load " + file + ": "
	if line > 0 {
		out += fmt.Sprintf("line %d: ", line)
	}
	return &loadError{msg: out + msg, cause: err}
}

func describeFiles(files []types.ConfigFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Filename
	}
	return strings.Join(names, ", ")
}

// loadError is an ErrInvalidConfig whose message is complete by itself, keeping compose-go's
// error reachable for errors.Is/As.
type loadError struct {
	msg   string
	cause error
}

func (e *loadError) Error() string   { return e.msg }
func (e *loadError) Unwrap() []error { return []error{ErrInvalidConfig, e.cause} }

// checkBuilds checks what compose-go leaves to build time: that a local build context and its
// Dockerfile exist.
func checkBuilds(p *types.Project, set *fileSet) error {
	for _, name := range p.ServiceNames() {
		b := p.Services[name].Build
		if b == nil || isRemoteContext(b.Context) {
			continue
		}
		fail := func(format string, args ...any) error {
			msg := fmt.Sprintf(format, args...)
			for i := len(set.order) - 1; i >= 0; i-- {
				if l := lineOf(set.docs[set.order[i]], []string{"services", name, "build"}); l > 0 {
					return errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: line %d: %s", set.order[i], l, msg))
				}
			}
			return errdefs.New(ErrInvalidConfig, "load: "+msg)
		}
		fi, err := os.Stat(b.Context)
		if err != nil || !fi.IsDir() {
			return fail("service %q: build context %s does not exist or is not a directory", name, b.Context)
		}
		if b.DockerfileInline != "" {
			continue
		}
		df := dockerfilePath(b)
		if fi, err := os.Stat(df); err != nil || !fi.Mode().IsRegular() {
			return fail("service %q: Dockerfile %s does not exist", name, df)
		}
	}
	return nil
}

// dockerfilePath is the absolute Dockerfile of a local build.
func dockerfilePath(b *types.BuildConfig) string {
	df := b.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if !filepath.IsAbs(df) {
		df = filepath.Join(b.Context, df)
	}
	return df
}

// isRemoteContext reports a build context that is a URL (git, http) rather than a directory.
func isRemoteContext(ctx string) bool {
	return strings.Contains(ctx, "://") || strings.HasPrefix(ctx, "git@") || strings.HasPrefix(ctx, "github.com/")
}
