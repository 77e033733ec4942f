package compose

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// Interpolation reads only what the runner gives, never composebox's own environment: a file
// written by a third party must not be able to say ${OPENAI_API_KEY} and get the runner's key.
// The sources, lowest precedence first:
//   - the task's .env (inside the task directory);
//   - LoadOptions.PassEnv: names read one by one from the process environment;
//   - LoadOptions.Environment (--var KEY=VAL and --env-file FILE on the command line);
//   - per-sample variables: SAMPLE_METADATA_* and LoadOptions.SampleEnv, set only when a file
//     references them;
//   - what composebox sets itself: COMPOSEBOX_BASE_IMAGE, and COMPOSE_PROJECT_NAME (the
//     project's name, which compose-go sets).
// As in compose, a variable that is none of these and has no default in the file is blank, with
// a warning naming it and the flags that set it (UnsetVariables); ${VAR:?message} fails.

// SampleVariablesEnv is set by Load, in the project's Environment, to the per-sample variables
// the files reference (comma-separated), when there is any: see SampleVariables.
const SampleVariablesEnv = "COMPOSEBOX_SAMPLE_VARIABLES"

// ProjectNameEnv is the variable compose files read the project name from. Each sample has its
// own project name, so it is a per-sample variable.
const ProjectNameEnv = "COMPOSE_PROJECT_NAME"

// SampleVariables lists the per-sample variables the files of a project loaded by Load
// reference: SAMPLE_METADATA_* names, COMPOSE_PROJECT_NAME and the keys of LoadOptions.SampleEnv.
// A task with any must be loaded again for each sample, with that sample's values.
func SampleVariables(p *types.Project) []string {
	if p == nil || p.Environment[SampleVariablesEnv] == "" {
		return nil
	}
	return strings.Split(p.Environment[SampleVariablesEnv], ",")
}

// Poolable reports whether samples of a project loaded by Load can be started in advance, and
// why not. A sample whose files reference per-sample variables is loaded with its own values,
// so no sample started before it is asked for can stand in for it. The reason is worded once
// here so that the orchestrator, doctor and config say the same thing.
func Poolable(p *types.Project) (bool, string) {
	vars := SampleVariables(p)
	if len(vars) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("its files reference per-sample variables (%s): each sample is loaded with its own values",
		strings.Join(vars, ", "))
}

var reVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// environment assembles the interpolation variables of a load, before the per-sample ones.
// The .env file is read only from a task directory that can be a root, and only when it
// resolves inside the allowed roots.
func (opts LoadOptions) environment(wd string, conf *confiner, maxSize int64) (types.Mapping, []Violation, error) {
	given := types.Mapping{}
	for _, name := range opts.PassEnv {
		if !reVarName.MatchString(name) {
			return nil, nil, errdefs.New(ErrInvalidConfig, fmt.Sprintf("load: pass-env %q: not a variable name", name))
		}
		if v, ok := os.LookupEnv(name); ok {
			given[name] = v
		}
	}
	maps.Copy(given, opts.Environment)
	env := types.Mapping{}
	var problems []Violation
	disabled, _ := strconv.ParseBool(given["COMPOSE_DISABLE_ENV_FILE"])
	if !disabled && conf.refused == "" {
		dotEnv := filepath.Join(wd, ".env")
		if _, err := os.Stat(dotEnv); err == nil {
			v := conf.check(dotEnv, false)
			fi, _ := os.Stat(v.resolved)
			switch {
			case v.rule != "":
				problems = append(problems, Violation{Field: ".env", Value: dotEnv, Rule: v.rule, Why: v.explain(dotEnv), OptIn: v.optIn})
			case fi == nil || !fi.Mode().IsRegular():
				problems = append(problems, Violation{Field: ".env", Value: dotEnv, Why: "not a regular file", Invalid: true})
			case fi.Size() > maxSize:
				problems = append(problems, Violation{Field: ".env", Value: dotEnv, Why: "larger than the " + byteSize(maxSize) + " limit", Invalid: true})
			default:
				vars, err := dotenv.GetEnvFromFile(given, []string{v.resolved})
				if err != nil {
					return nil, nil, &loadError{msg: fmt.Sprintf("load %s: %v", dotEnv, err), cause: err}
				}
				env.Merge(vars)
			}
		}
	}
	maps.Copy(env, given)
	if _, ok := env[BaseImageEnv]; !ok {
		// Without busybox there is no base image; a file that needs it fails on the blank value.
		if ref, err := imagespec.BaseRef(imagespec.DefaultBusybox); err == nil {
			env[BaseImageEnv] = ref
		}
	}
	return env, problems, nil
}

var reMetadataRef = regexp.MustCompile(`\b` + MetadataPrefix + `[A-Za-z0-9_]+`)

// sampleVariables sets the per-sample variables the files reference, and records which are
// referenced in SampleVariablesEnv.
func (s *fileSet) sampleVariables(env types.Mapping, opts LoadOptions) {
	referenced := map[string]bool{}
	for _, data := range s.content {
		for _, m := range reMetadataRef.FindAll(data, -1) {
			referenced[string(m)] = true
		}
	}
	for k, v := range opts.Metadata {
		if name := MetadataVar(k); referenced[name] {
			env[name] = v
		}
	}
	for k, v := range opts.SampleEnv {
		if s.references(k) {
			env[k] = v
			referenced[k] = true
		}
	}
	if s.references(ProjectNameEnv) {
		referenced[ProjectNameEnv] = true
	}
	if len(referenced) > 0 {
		env[SampleVariablesEnv] = strings.Join(slices.Sorted(maps.Keys(referenced)), ",")
	}
}

// UnsetVariablesEnv is set by Load, in the project's Environment, to the variables the files
// use that are not set and have no default (comma-separated), when there is any: see
// UnsetVariables.
const UnsetVariablesEnv = "COMPOSEBOX_UNSET_VARIABLES"

// UnsetVariables lists the variables that the files of a project loaded by Load use unset and
// without a default. Each was left blank, as compose leaves it, and Load warned about it
// through LoadOptions.Logger. SAMPLE_METADATA_* variables are not listed.
func UnsetVariables(p *types.Project) []string {
	if p == nil || p.Environment[UnsetVariablesEnv] == "" {
		return nil
	}
	return strings.Split(p.Environment[UnsetVariablesEnv], ",")
}

// warnUnset logs each variable the files use unset and without a default, which compose-go
// left blank: where it is used and the flags that set it. A metadata variable a sample does not
// give is blank too, with a warning of its own. It returns the others, and a problem for each
// that says where it is used, for a load that fails (a blank value is often the cause). quiet
// leaves out the warnings about the others (LoadOptions.QuietUnset).
func (s *fileSet) warnUnset(unset []string, log *slog.Logger, quiet bool) (names []string, problems []Violation) {
	for _, name := range unset {
		if strings.HasPrefix(name, MetadataPrefix) {
			log.Warn("sample metadata variable is not set, defaulting to a blank string", "variable", name)
			continue
		}
		file, line := s.locateVariable(name)
		where := ""
		if file != "" {
			where = fmt.Sprintf(" (%s line %d)", file, line)
		}
		if !quiet {
			log.Warn("variable is not set, defaulting to a blank string", "variable", name, "file", file, "line", line,
				"set_with", variableFix(name))
		}
		names = append(names, name)
		problems = append(problems, Violation{
			Field: "${" + name + "}", Rule: "variables", Invalid: true, OptIn: variableFix(name),
			Why: "is not set and was left blank" + where + ": composebox does not read its own environment for a compose file",
		})
	}
	return names, problems
}

// recordUnset notes the variables left blank in the project (UnsetVariables).
func recordUnset(p *types.Project, names []string) {
	if len(names) == 0 {
		return
	}
	if p.Environment == nil {
		p.Environment = types.Mapping{}
	}
	p.Environment[UnsetVariablesEnv] = strings.Join(names, ",")
}

// locateVariable finds the first file and line that reference $NAME or ${NAME, skipping
// comment lines: a comment that mentions a variable does not use it.
func (s *fileSet) locateVariable(name string) (string, int) {
	re := regexp.MustCompile(`\$\{?` + regexp.QuoteMeta(name) + `\b`)
	for _, f := range s.order {
		for i, line := range strings.Split(string(s.content[f]), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "#") && re.MatchString(line) {
				return f, i + 1
			}
		}
	}
	return "", 0
}
