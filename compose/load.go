package compose

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/paths"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/composebox/composebox/internal/errdefs"
)

// BaseImageEnv is the variable through which compose files name composebox's base image, whose
// tag is a content hash: `image: ${COMPOSEBOX_BASE_IMAGE}`, or a build arg for `FROM $BASE`.
// Load sets it from imagespec.BaseRef unless the environment already has it.
const BaseImageEnv = "COMPOSEBOX_BASE_IMAGE"

// MetadataPrefix starts the variable a sample's metadata key is interpolated through.
const MetadataPrefix = "SAMPLE_METADATA_"

// KeepAlive is the command of a generated project's service: it keeps the container running
// until it is stopped, so that commands are exec'd into it.
func KeepAlive() []string { return []string{"tail", "-f", "/dev/null"} }

// defaultStopGrace is the stop grace of generated services.
const defaultStopGrace = "1s"

// LoadOptions tune Load. The zero value loads with the task's .env alone, against
// DefaultPolicy.
type LoadOptions struct {
	// Environment are variables for interpolation (on the command line, --var and --env-file).
	// They take precedence over PassEnv and the project's .env file.
	Environment map[string]string
	// PassEnv names variables read from the process environment, one by one (--pass-env). No
	// other variable of the process environment is ever read.
	PassEnv []string
	// SampleEnv are variables whose value differs per sample (COMPOSE_PROJECT_NAME, say). Like
	// SAMPLE_METADATA_*, each is set only when the files reference it, and a project that
	// references any must be loaded again for each sample (SampleVariables).
	SampleEnv map[string]string
	// Profiles to enable. Empty means COMPOSE_PROFILES from the variables, if set.
	Profiles []string
	// Metadata is the sample's metadata. SAMPLE_METADATA_<KEY> (key upper-cased, anything
	// but letters, digits and '_' turned into '_') is set only for the keys the files reference;
	// one a file references and the sample does not give is blank.
	Metadata map[string]string
	// Name is the project name seen while loading, as ${COMPOSE_PROJECT_NAME}. Empty means
	// SampleEnv's COMPOSE_PROJECT_NAME when the files reference it, else the project directory's
	// base name. Normalize sets the per-sample name afterwards either way.
	Name string
	// DefaultService chooses the default service, overriding every other rule.
	DefaultService string
	// AgentImage adds a service named "default" on this image, kept alive, attached to every
	// network of the project, and the default unless DefaultService says otherwise: the agent's
	// container of suites whose harness ran it beside the project.
	AgentImage string
	// ImageOverrides maps services to the image they run instead of theirs. A service with a
	// build section runs the override and is not built.
	ImageOverrides map[string]string
	// Policy is the security policy the project must pass; nil means DefaultPolicy(). Its host
	// path rules also bound the files the loader reads (extends, include, env and label files).
	Policy *Policy
	// Limits bound the input (file size, alias expansion); zero fields take the defaults.
	Limits Limits
	// Logger receives warnings: each variable used unset and without a default, once per load.
	// Default: discard.
	Logger *slog.Logger
	// QuietUnset leaves out the warnings about unset variables, for a load of files whose
	// earlier load already gave them (a sample's own load of its task's files). They are still
	// listed by UnsetVariables.
	QuietUnset bool
}

// Load reads the resolved project through compose-go (interpolation, profiles, extends,
// include and every -f file merged in order) and checks it against the policy. Generated and
// inline projects are loaded from memory. The files the loader would read for extends, include,
// env_file and label_file are checked first: a path outside the allowed roots is never read.
//
// A variable used unset and without a default is blank, as compose makes it, with a warning on
// LoadOptions.Logger (UnsetVariables lists them). Every problem comes back at once in a
// *PolicyError: missing build contexts and Dockerfiles, the rules compose checks itself
// (container_name used twice, start_interval without start_period), the default service, and
// every policy violation, each with its service, field and opt-in. A file that cannot be parsed
// is an ErrInvalidConfig naming the file and line. The returned project is rewritten as the
// policy checked it: host paths resolved, pull_policy never.
func Load(ctx context.Context, r *Resolution, opts LoadOptions) (*types.Project, error) {
	l, err := load(ctx, r, opts)
	if err != nil {
		return nil, err
	}
	return l.result()
}

// Prepare is Load followed by a trial Normalize with norm (its Name defaults to the loaded
// project's), so that the problems normalisation would find come back with all the others, in
// the same *PolicyError. It returns the loaded project, not the normalised one.
func Prepare(ctx context.Context, r *Resolution, opts LoadOptions, norm NormalizeOptions) (*types.Project, error) {
	l, err := load(ctx, r, opts)
	if err != nil {
		return nil, err
	}
	if l.proj != nil {
		if norm.Name == "" {
			norm.Name = l.proj.Name
		}
		if _, err := Normalize(l.proj, norm); err != nil {
			l.problems = append(l.problems, Violation{Rule: "normalize", Why: err.Error(), Invalid: true})
		}
	}
	return l.result()
}

// loaded is the outcome of a load: the project (nil when it could not be loaded without
// reading what it must not) and every problem found.
type loaded struct {
	op       string
	proj     *types.Project
	problems []Violation
}

func (l *loaded) result() (*types.Project, error) {
	if len(l.problems) > 0 {
		return nil, &PolicyError{Op: l.op, Violations: l.problems}
	}
	return l.proj, nil
}

func load(ctx context.Context, r *Resolution, opts LoadOptions) (*loaded, error) {
	if r == nil {
		return nil, errdefs.New(ErrInvalidConfig, "load: no resolution given")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	policy := DefaultPolicy()
	if opts.Policy != nil {
		policy = *opts.Policy
	}
	wd := r.WorkingDir
	if wd == "" {
		return nil, errdefs.New(ErrInvalidConfig, "load: the project has no working directory: give one (relative paths and .env resolve against it)")
	}
	lim := opts.Limits.withDefaults()
	conf := newConfiner(policy, wd)
	opts.Environment = layoutEnv(r, opts.Environment)
	env, problems, err := opts.environment(wd, conf, lim.MaxFileSize)
	if err != nil {
		return nil, err
	}

	set := &fileSet{lim: lim, docs: map[string][]*yaml.Node{}, content: map[string][]byte{}}
	details := types.ConfigDetails{WorkingDir: wd, Environment: env}
	interpolate := true
	switch r.Source {
	case SourceFile, SourceDirectory:
		if r.Layout == LayoutHarbor {
			// Harbor's own base file defines main; the task's overlay, if any, goes on top.
			details.ConfigFiles = append(details.ConfigFiles, types.ConfigFile{
				Filename: filepath.Join(filepath.Dir(wd), harborTaskFile), Config: harborModel(r, env, len(r.Files) > 0)})
			interpolate = len(r.Files) > 0
		} else if len(r.Files) == 0 {
			return nil, errdefs.New(ErrInvalidConfig, "load: resolution names no compose file")
		}
		if refused := checkComposeFiles(r.Files, conf); len(refused) > 0 {
			// Never read: its contents would come back in the parse error.
			return &loaded{op: "check " + strings.Join(r.Files, ", "), problems: refused}, nil
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
			// The guard follows the struct's references like a file's.
			if data, err := yaml.Marshal(cfg); err == nil {
				if err := set.add(structName, data); err != nil {
					return nil, err
				}
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
	// compose-go sets the project name for interpolation; the guard below must see the same.
	env[ProjectNameEnv] = name
	l := &loaded{op: "check " + describeFiles(details.ConfigFiles), problems: problems}
	if interpolate {
		set.sampleVariables(env, opts)
	}
	refProblems, err := set.followReferences(wd, env, conf, interpolate)
	if err != nil {
		return nil, err
	}
	if len(refProblems) > 0 {
		// compose-go would read those files: stop here, with what was found so far.
		l.problems = append(l.problems, refProblems...)
		return l, nil
	}

	profiles := opts.Profiles
	if len(profiles) == 0 {
		for p := range strings.SplitSeq(env["COMPOSE_PROFILES"], ",") {
			if p = strings.TrimSpace(p); p != "" {
				profiles = append(profiles, p)
			}
		}
	}

	registerEnvFileFormats()
	unset := &unsetRecorder{}
	proj, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(name, true)
		o.Profiles = profiles
		o.SkipInterpolation = !interpolate
		// env_file is read below, once its paths are checked.
		o.SkipResolveEnvironment = true
		if o.Interpolate != nil {
			ip := *o.Interpolate
			ip.Substitute = unset.substitute
			o.Interpolate = &ip
		}
	})
	blankNames, blank := set.warnUnset(unset.sorted(), log, opts.QuietUnset)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("load: %w", ctx.Err())
		}
		lerr := set.wrap(err, details.ConfigFiles)
		if len(l.problems) == 0 && len(blank) == 0 {
			return nil, lerr
		}
		// A variable left blank often causes the load error: name both.
		l.problems = append(l.problems, blank...)
		l.problems = append(l.problems, Violation{Rule: "load", Why: lerr.Error(), Invalid: true})
		return l, nil
	}
	recordUnset(proj, blankNames)
	proj.ComposeFiles = slices.Clone(r.Files)
	if envProblems, bad := checkEnvFiles(proj, conf, lim.MaxFileSize); bad {
		l.problems = append(l.problems, envProblems...)
	} else if resolved, err := proj.WithServicesEnvironmentResolved(false); err != nil {
		l.problems = append(l.problems, Violation{Rule: "env-file", Why: err.Error(), Invalid: true})
	} else {
		proj = resolved
	}
	if err := tailor(proj, r, opts); err != nil {
		l.problems = append(l.problems, Violation{Rule: "task", Why: err.Error(), Invalid: true})
	}
	l.problems = append(l.problems, checkBuilds(proj, set)...)
	l.problems = append(l.problems, checkConsistency(proj)...)
	if _, err := DefaultService(proj); err != nil {
		v := Violation{Rule: "default-service", Why: err.Error(), Invalid: true}
		if nd := (*NoDefaultError)(nil); errors.As(err, &nd) {
			v.OptIn = "--default SERVICE, or --agent-image IMAGE"
		}
		l.problems = append(l.problems, v)
	}
	c := newChecker(policy, proj)
	c.walkProject()
	c.out = append(c.out, egressViolations(policy, proj)...)
	l.problems = append(l.problems, c.out...)
	if len(c.out) == 0 {
		policy.enforce(proj)
	}
	l.proj = proj
	return l, nil
}

// checkComposeFiles refuses, before anything reads them, the compose files (the resolved one
// and every -f) that do not resolve inside the allowed roots: a task directory whose
// compose.yaml is a symlink to a host file, or a file in a directory that cannot be a root
// (/etc/shadow named as the task). Only where the path resolves to is named, never what the
// file holds.
func checkComposeFiles(files []string, conf *confiner) []Violation {
	var out []Violation
	for _, f := range files {
		if v := conf.check(f, false); v.rule != "" {
			out = append(out, Violation{Field: "compose file", Value: f, Rule: v.rule, Why: v.explain(f), OptIn: v.optIn})
		}
	}
	return out
}

// checkEnvFiles checks the env files of every service before they are read: inside the allowed
// roots (the policy walk reports those that are not), regular and within the size limit.
func checkEnvFiles(p *types.Project, conf *confiner, maxSize int64) (out []Violation, bad bool) {
	for _, name := range p.ServiceNames() {
		for i, f := range p.Services[name].EnvFiles {
			v := conf.check(f.Path, false)
			if v.rule != "" {
				bad = true // the policy walk reports it
				continue
			}
			fi, err := os.Stat(v.resolved)
			switch {
			case err != nil:
				continue // compose-go reports a missing required file itself
			case !fi.Mode().IsRegular():
				out = append(out, Violation{Service: name, Field: fmt.Sprintf("env_file[%d].path", i), Value: f.Path, Rule: "env-file", Why: "not a regular file", Invalid: true})
			case fi.Size() > maxSize:
				out = append(out, Violation{Service: name, Field: fmt.Sprintf("env_file[%d].path", i), Value: f.Path, Rule: "env-file",
					Why: "larger than the " + byteSize(maxSize) + " limit", Invalid: true})
			}
		}
	}
	return out, bad || len(out) > 0
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

// generatedModel is the one-service project generated for a lone Dockerfile, or for no config at
// all on the default image: a keep-alive command, `init: true`, no network and a short stop
// grace. A generated
// build gets the base image as the build arg COMPOSEBOX_BASE_IMAGE, so that a lone Dockerfile
// can start with `ARG COMPOSEBOX_BASE_IMAGE` and `FROM ${COMPOSEBOX_BASE_IMAGE}`: its tag is a
// content hash that no Dockerfile could spell.
func generatedModel(r *Resolution, env types.Mapping) map[string]any {
	keepAlive := KeepAlive()
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

// fileSet holds every file a load reads, parsed once to check the limits, to follow extends and
// include, to find variable references and to put line numbers on errors.
type fileSet struct {
	lim     Limits
	order   []string
	docs    map[string][]*yaml.Node
	content map[string][]byte
	// env and bases are, per file read through include or extends, the variables its paths
	// are interpolated with and the directories its relative paths may be relative to.
	env   map[string]types.Mapping
	bases map[string][]string
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
		return &loadError{msg: fmt.Sprintf("load %s: %s", name, boundEcho(err.Error())), cause: err}
	}
	s.order = append(s.order, name)
	s.docs[name] = docs
	s.content[name] = data
	return nil
}

// followReferences checks the files that extends, include, env_file and label_file make the
// loader read, before compose-go reads them itself (in full, whatever they are: a FIFO or
// /dev/zero would never end, and a file outside the task directory must not be read at all).
// Each must resolve inside the allowed roots, be a regular file and keep within the limits;
// the compose files among them are read and followed in turn. compose-go resolves a relative
// path against the project directory, the including file's directory or an include's project
// directory, and expands a leading ~: every such candidate that exists is checked. It returns
// the references that leave the allowed roots; other problems are errors.
func (s *fileSet) followReferences(wd string, env types.Mapping, conf *confiner, interpolate bool) ([]Violation, error) {
	if s.env == nil {
		s.env, s.bases = map[string]types.Mapping{}, map[string][]string{}
	}
	var out []Violation
	seen := map[string]bool{}
	for i := 0; i < len(s.order); i++ {
		from := s.order[i]
		fenv := env
		if e, ok := s.env[from]; ok {
			fenv = e
		}
		subst := func(p string) string {
			if !interpolate {
				return p
			}
			lookup := func(k string) (string, bool) { v, ok := fenv[k]; return v, ok }
			// Blank where unset, as the loader will make it; the loader warns about those.
			if v, err := (&unsetRecorder{}).substitute(p, lookup); err == nil {
				return v
			}
			return p
		}
		bases := []string{wd}
		if filepath.IsAbs(from) {
			bases = append(bases, filepath.Dir(from))
		}
		bases = append(bases, s.bases[from]...)
		// check vets one reference; it returns the candidates that exist and may be read.
		check := func(field, written string, dir bool) ([]string, error) {
			var ok []string
			for _, c := range candidates(subst(written), bases) {
				fi, err := os.Stat(c)
				if err != nil {
					continue // compose-go reports a missing one with its own message
				}
				key := field + "\x00" + c
				if seen[key] {
					continue
				}
				seen[key] = true
				if v := conf.check(c, false); v.rule != "" {
					bad := Violation{Field: field, Value: written, Rule: v.rule, Why: v.explain(written) + " (read by " + from + ")", OptIn: v.optIn}
					if rest, ok := strings.CutPrefix(field, "services."); ok {
						// services.NAME.extends.file: NAME may hold dots, the field names none.
						for _, f := range []string{".extends.file", ".env_file", ".label_file"} {
							if name, ok := strings.CutSuffix(rest, f); ok {
								bad.Service, bad.Field = name, f[1:]
							}
						}
					}
					out = append(out, bad)
					continue
				}
				switch {
				case dir && !fi.IsDir():
					return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: %s is not a directory", from, c))
				case !dir && !fi.Mode().IsRegular():
					return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: %s is not a regular file", from, c))
				case !dir && fi.Size() > s.lim.MaxFileSize:
					return nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load %s: %s is larger than the %s limit", from, c, byteSize(s.lim.MaxFileSize)))
				}
				ok = append(ok, c)
			}
			return ok, nil
		}
		refs, incs := referencedFiles(s.docs[from])
		for _, ref := range refs {
			files, err := check(ref.field, ref.path, false)
			if err != nil {
				return nil, err
			}
			if !ref.yaml {
				continue
			}
			for _, f := range files {
				if err := s.follow(f, fenv, nil); err != nil {
					return nil, err
				}
			}
		}
		for _, inc := range incs {
			field := fmt.Sprintf("include[%d]", inc.index)
			incEnv := fenv
			var projectDirs []string
			if inc.projectDir != "" {
				dirs, err := check(field+".project_directory", inc.projectDir, true)
				if err != nil {
					return nil, err
				}
				projectDirs = dirs
			}
			envFiles := inc.envFiles
			if len(envFiles) == 0 {
				// compose-go reads the .env of the included project's directory.
				for _, d := range projectDirs {
					envFiles = append(envFiles, filepath.Join(d, ".env"))
				}
				for _, p := range inc.paths {
					for _, c := range candidates(subst(p), bases) {
						envFiles = append(envFiles, filepath.Join(filepath.Dir(c), ".env"))
					}
				}
			}
			var readable []string
			for _, f := range envFiles {
				files, err := check(field+".env_file", f, false)
				if err != nil {
					return nil, err
				}
				readable = append(readable, files...)
			}
			if len(readable) > 0 {
				vars, err := dotenv.GetEnvFromFile(fenv, readable)
				if err == nil {
					incEnv = fenv.Clone().Merge(vars)
				}
			}
			for _, p := range inc.paths {
				files, err := check(field+".path", p, false)
				if err != nil {
					return nil, err
				}
				for _, f := range files {
					if err := s.follow(f, incEnv, projectDirs); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return out, nil
}

// follow reads a compose file that extends or include pull in, once.
func (s *fileSet) follow(path string, env types.Mapping, bases []string) error {
	if _, ok := s.docs[path]; ok {
		return nil
	}
	if _, err := s.read(path); err != nil {
		return err
	}
	s.env[path] = env
	s.bases[path] = bases
	return nil
}

// candidates are the absolute paths compose-go may read for a path as written: itself when
// absolute, else against each base directory; and with a leading ~ expanded.
func candidates(p string, bases []string) []string {
	if p == "" {
		return nil
	}
	var out []string
	if expanded := paths.ExpandUser(p); expanded != p && filepath.IsAbs(expanded) {
		out = append(out, filepath.Clean(expanded))
	}
	if filepath.IsAbs(p) {
		out = append(out, filepath.Clean(p))
	} else {
		for _, b := range bases {
			out = append(out, filepath.Join(b, p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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
	return &loadError{msg: out + boundEcho(msg), cause: err}
}

// Bounds on what an error may quote of a file: a file that is not compose YAML at all (a
// host file named as the task, a log) would otherwise come back whole in compose-go's
// "additional properties '...' not allowed".
const (
	maxQuoted     = 40  // runes of one quoted value
	maxLoadErrMsg = 600 // bytes of the message
)

var reEchoed = regexp.MustCompile(`'[^'\n]*'|"[^"\n]*"|` + "`[^`\n]*`")

// boundEcho cuts each quoted value of a loader's message to maxQuoted runes and the message
// to maxLoadErrMsg bytes, and replaces bytes that are not UTF-8.
func boundEcho(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = reEchoed.ReplaceAllStringFunc(msg, func(q string) string {
		inner := []rune(q[1 : len(q)-1])
		if len(inner) <= maxQuoted {
			return q
		}
		return q[:1] + string(inner[:maxQuoted]) + "…" + q[len(q)-1:]
	})
	if len(msg) > maxLoadErrMsg {
		cut := maxLoadErrMsg
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = fmt.Sprintf("%s… (%d more bytes)", msg[:cut], len(msg)-cut)
	}
	return msg
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

// checkBuilds checks what compose-go leaves to build time: that each local build context and
// its Dockerfile exist. Every missing one is a problem naming the file and line of its build.
func checkBuilds(p *types.Project, set *fileSet) []Violation {
	var out []Violation
	for _, name := range p.ServiceNames() {
		b := p.Services[name].Build
		if b == nil || isRemoteContext(b.Context) || strings.Contains(b.Context, "://") {
			continue
		}
		add := func(field, format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			for i := len(set.order) - 1; i >= 0; i-- {
				if l := lineOf(set.docs[set.order[i]], []string{"services", name, "build"}); l > 0 {
					msg = fmt.Sprintf("%s: line %d: %s", set.order[i], l, msg)
					break
				}
			}
			out = append(out, Violation{Service: name, Field: field, Rule: "build", Why: msg, Invalid: true})
		}
		fi, err := os.Stat(b.Context)
		if err != nil || !fi.IsDir() {
			add("build.context", "build context %s does not exist or is not a directory", b.Context)
			continue
		}
		if b.DockerfileInline != "" {
			continue
		}
		df := DockerfilePath(b)
		if fi, err := os.Stat(df); err != nil || !fi.Mode().IsRegular() {
			add("build.dockerfile", "Dockerfile %s does not exist", df)
		}
	}
	return out
}

// DockerfilePath is the absolute Dockerfile of a local build.
func DockerfilePath(b *types.BuildConfig) string {
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
