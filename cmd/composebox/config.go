package main

import (
	"context"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/compose"
)

type configOptions struct {
	Task string
}

func newConfigCmd(g *globals) *cobra.Command {
	var opts configOptions
	cmd := &cobra.Command{
		Use:   "config [PATH]",
		Short: "Print the resolved, normalised project",
		Long: `Resolves PATH (default "."): a compose file, a directory, a Dockerfile, or a directory without
either for the default image. Loads it as a sample would get it (interpolation, .env, extends,
the composebox labels, init and the short stop grace), checks it against the security policy and
prints it as YAML, or as JSON with --json. Nothing is built or started.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "."
			if len(args) == 1 {
				path = args[0]
			}
			return runConfig(cmd.Context(), g, path, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Task, "task", "", "task name (default: the project directory's name)")
	return cmd
}

func runConfig(ctx context.Context, g *globals, path string, opts configOptions) error {
	r, err := compose.Resolve(path, compose.ResolveOptions{})
	if err != nil {
		return err
	}
	proj, err := compose.Load(ctx, r, compose.LoadOptions{Logger: g.log})
	if err != nil {
		return err
	}
	policy := compose.DefaultPolicy()
	if err := policy.Check(proj); err != nil {
		return err
	}
	policy.ApplyDefaults(proj)
	task := opts.Task
	if task == "" {
		task = filepath.Base(r.WorkingDir)
	}
	sample := compose.NewSampleID()
	proj, err = compose.Normalize(proj, compose.NormalizeOptions{
		Name:   compose.ProjectName(task, sample),
		Task:   task,
		Sample: sample,
	})
	if err != nil {
		return err
	}
	var out []byte
	if g.JSON {
		out, err = proj.MarshalJSON()
	} else {
		out, err = proj.MarshalYAML()
	}
	if err != nil {
		return err
	}
	_, err = g.stdout.Write(out)
	return err
}
