package compose

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
	"github.com/composebox/composebox/internal/images/imagespec"
)

// Interpolation reads only what the runner gives, never composebox's own environment: a file
// written by a third party must not be able to say ${OPENAI_API_KEY} and get the runner's key.
// The sources, lowest precedence first:
//   - the task's .env (inside the task directory);
//   - LoadOptions.PassEnv: names read one by one from the process environment;
//   - LoadOptions.Environment (-e KEY=VAL and --env-file FILE on the command line);
//   - per-sample variables: SAMPLE_METADATA_* and LoadOptions.SampleEnv, set only when a file
//     references them;
//   - what composebox sets itself: COMPOSEBOX_BASE_IMAGE, and COMPOSE_PROJECT_NAME (the
//     project's name, which compose-go sets).
// A variable that is none of these and has no default in the file is ErrInvalidConfig naming
// the variable and the flags that set it.

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

// quietSubstitute interpolates like compose-go, recording the variables that are unset and
// have no default instead of logging them.
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

// unsetVariables turns the unset variables of a load into problems, each with the file and line
// that uses it. A metadata variable a sample does not give is blank, as it always was.
func (s *fileSet) unsetVariables(unset map[string]bool, log interface{ Warn(string, ...any) }) []Violation {
	var out []Violation
	for _, name := range slices.Sorted(maps.Keys(unset)) {
		if strings.HasPrefix(name, MetadataPrefix) {
			log.Warn("sample metadata variable is not set, defaulting to a blank string", "variable", name)
			continue
		}
		where := ""
		if file, line := s.locateVariable(name); file != "" {
			where = fmt.Sprintf(" (%s line %d)", file, line)
		}
		out = append(out, Violation{
			Field: "${" + name + "}", Rule: "variables", Invalid: true, OptIn: variableFix(name),
			Why: "is not set and has no default" + where + ": composebox does not read its own environment for a compose file",
		})
	}
	return out
}

// locateVariable finds the first file and line that reference $NAME or ${NAME.
func (s *fileSet) locateVariable(name string) (string, int) {
	re := regexp.MustCompile(`\$\{?` + regexp.QuoteMeta(name) + `\b`)
	for _, f := range s.order {
		data := s.content[f]
		if loc := re.FindIndex(data); loc != nil {
			return f, strings.Count(string(data[:loc[0]]), "\n") + 1
		}
	}
	return "", 0
}
