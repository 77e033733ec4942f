package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/spf13/cobra"

	"github.com/composebox/composebox/compose"
	"github.com/composebox/composebox/orchestrator"
)

type configOptions struct {
	Task  string
	flags taskFlags
}

func newConfigCmd(g *globals) *cobra.Command {
	var opts configOptions
	cmd := &cobra.Command{
		Use:   "config [PATH]",
		Short: "Print the resolved, normalised project",
		Long: `Resolves PATH (default "."): a compose file, a directory, a Harbor or Terminal-Bench task, a
Dockerfile, or a directory without either for the default image. Loads it as a sample would get it
(interpolation, .env, extends, the per-sample variables, the composebox labels, init and the short
stop grace), checks it against the security policy and prints it as YAML, or as JSON with --json,
with the policy in force under x-composebox-policy. Every problem is listed at once, each with the
flag that would allow it. Nothing is built or started.

What composebox changed so that samples can run side by side (a container_name turned into a
network alias, a fixed host port made ephemeral, an external network made the sample's own, a
fixed name prefixed) is listed in comments at the top of the YAML, and as "adaptations" in the
JSON. Whether a warm pool can keep samples of the task is "pool" in the JSON ({"poolable", "reason"});
a task that cannot be pooled says why in a "# warm pools: no" comment at the top of the YAML.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			if path == "" && len(opts.flags.Files) == 0 {
				path = "."
			}
			g.warnDeprecated(cmd, opts.flags.deprecations(false)...)
			return runConfig(cmd.Context(), g, path, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Task, "task", "", "task name (default: the layout's, else the directory's)")
	opts.flags.register(cmd.Flags())
	return cmd
}

func runConfig(ctx context.Context, g *globals, arg string, opts configOptions) error {
	proj, adaptations, err := loadTask(ctx, g, arg, opts.Task, &opts.flags)
	if err != nil {
		return err
	}
	poolable, why := compose.Poolable(proj)
	if g.JSON {
		out, err := proj.MarshalJSON()
		if err != nil {
			return err
		}
		return printConfigJSON(g, out, adaptations, configPool{Poolable: poolable, Reason: why})
	}
	out, err := proj.MarshalYAML()
	if err != nil {
		return err
	}
	var b strings.Builder
	if !poolable {
		fmt.Fprintf(&b, "# warm pools: no: %s\n", why)
	}
	if len(adaptations) > 0 {
		b.WriteString("# Adapted so that samples of this project can run side by side:\n")
		for _, a := range adaptations {
			fmt.Fprintf(&b, "#   %s\n", a.Message)
		}
	}
	b.Write(out)
	g.setResult(nil, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
	return nil
}

// loadTask resolves PATH (or the first -f file) and loads it as a sample would get it, checked
// against the policy and normalised, with the policy in force under x-composebox-policy. It
// also returns what normalisation adapted. config prints the project; doctor only reports
// whether it loads and whether it can be pooled. Nothing is built or started.
func loadTask(ctx context.Context, g *globals, arg, task string, flags *taskFlags) (*types.Project, []compose.Adaptation, error) {
	lopts, err := flags.loadOptions()
	if err != nil {
		return nil, nil, err
	}
	path, files := flags.path(arg)
	r, err := compose.Resolve(path, compose.ResolveOptions{ExtraFiles: files})
	if err != nil {
		return nil, nil, err
	}
	if task == "" {
		task = r.TaskName
	}
	sample := compose.NewSampleID()
	name := compose.ProjectName(task, sample)
	vars := r.SampleVars(name, orchestrator.SampleDir(g.stateDir(), name))
	policy := lopts.Policy.AllowingDirs(vars.DirPaths()...)
	lopts.Policy, lopts.Logger, lopts.SampleEnv, lopts.Name = &policy, g.log, vars.Env, name
	adaptations := []compose.Adaptation{}
	norm := compose.NormalizeOptions{Name: name, Task: task, Sample: sample,
		OnAdapt: func(a compose.Adaptation) { adaptations = append(adaptations, a) }}
	proj, err := compose.Prepare(ctx, r, lopts, norm)
	if err != nil {
		return nil, nil, err
	}
	policy.ApplyDefaults(proj)
	adaptations = adaptations[:0] // Prepare's trial normalisation reported them once already
	if proj, err = compose.Normalize(proj, norm); err != nil {
		return nil, nil, err
	}
	if proj.Extensions == nil {
		proj.Extensions = map[string]any{}
	}
	proj.Extensions[compose.PolicyExtension] = policy
	return proj, adaptations, nil
}

// configPool is config's "pool" member: whether a warm pool can keep samples of the task.
type configPool struct {
	Poolable bool   `json:"poolable"`
	Reason   string `json:"reason,omitempty"`
}

// printConfigJSON prints the project's JSON with two more members, "adaptations" and "pool".
func printConfigJSON(g *globals, project []byte, adaptations []compose.Adaptation, pool configPool) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(project, &doc); err != nil {
		return err
	}
	a, err := json.Marshal(adaptations)
	if err != nil {
		return err
	}
	doc["adaptations"] = a
	if doc["pool"], err = json.Marshal(pool); err != nil {
		return err
	}
	g.setResult(doc, nil)
	return nil
}
