package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
)

type logsOptions struct {
	Project    string
	Follow     bool
	Tail       int
	Since      string
	Timestamps bool
}

func newLogsCmd(g *globals) *cobra.Command {
	var opts logsOptions
	cmd := &cobra.Command{
		Use:   "logs -p PROJECT [SERVICE...]",
		Short: "Show the output of a sample's services",
		Long: `Prints what the services' main processes wrote (all services, or the ones named), whether
they run or not: the container's stdout on stdout and its stderr on stderr. With more than one
service each line starts with the service name, as 'docker compose logs' prints it.
-f keeps following until Ctrl-C (or until the services stop). COMPOSEBOX_PROJECT stands in for -p.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := projectOf("logs", opts.Project)
			if err != nil {
				return err
			}
			opts.Project = p
			return runLogs(cmd, g, opts, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Project, "project", "p", "", "the sample's project name")
	f.BoolVarP(&opts.Follow, "follow", "f", false, "follow new output")
	f.IntVarP(&opts.Tail, "tail", "n", -1, "only the last N lines of each service (-1: all)")
	f.StringVar(&opts.Since, "since", "", "only output since then: a duration back from now (10m, 30s) or an RFC 3339 time")
	f.BoolVarP(&opts.Timestamps, "timestamps", "t", false, "start each line with its timestamp")
	return cmd
}

func runLogs(cmd *cobra.Command, g *globals, opts logsOptions, services []string) error {
	ctx := cmd.Context()
	since, err := parseSince(opts.Since, time.Now())
	if err != nil {
		return usageError{err}
	}
	lo := orchestrator.LogsOptions{Services: services, Follow: opts.Follow, Since: since, Timestamps: opts.Timestamps,
		Stdout: g.stdout, Stderr: g.stderr}
	switch {
	case opts.Tail == 0:
		lo.Tail = -1
	case opts.Tail > 0:
		lo.Tail = opts.Tail
	}
	if g.JSON && opts.Follow {
		return usageError{errors.New("logs: --json cannot be combined with -f (it prints one document at the end)")}
	}
	o, err := g.bareOrchestrator()
	if err != nil {
		return err
	}
	defer o.Close()
	if !g.JSON {
		// The logs are the output, streamed as they come: there is no result to add.
		return o.Logs(ctx, opts.Project, lo)
	}
	return logsJSON(ctx, g, o, opts.Project, lo)
}

// logsDoc is the JSON shape of `logs --json`: every line, service by service.
type logsDoc struct {
	Project string     `json:"project"`
	Lines   []logsLine `json:"lines"`
}

type logsLine struct {
	Service string `json:"service"`
	Stream  string `json:"stream"`
	Text    string `json:"text"`
}

func logsJSON(ctx context.Context, g *globals, o *orchestrator.Orchestrator, project string, lo orchestrator.LogsOptions) error {
	services := lo.Services
	if len(services) == 0 {
		ps, err := o.Ps(ctx, project)
		if err != nil {
			return err
		}
		for _, s := range ps {
			services = append(services, s.Service)
		}
	}
	doc := logsDoc{Project: project, Lines: []logsLine{}}
	for _, svc := range services {
		var stdout, stderr bytes.Buffer
		one := lo
		one.Services, one.Stdout, one.Stderr = []string{svc}, &stdout, &stderr
		if err := o.Logs(ctx, project, one); err != nil {
			return err
		}
		for _, s := range []struct {
			name string
			buf  *bytes.Buffer
		}{{"stdout", &stdout}, {"stderr", &stderr}} {
			for _, line := range strings.SplitAfter(s.buf.String(), "\n") {
				if line != "" {
					doc.Lines = append(doc.Lines, logsLine{Service: svc, Stream: s.name, Text: strings.TrimSuffix(line, "\n")})
				}
			}
		}
	}
	g.setResult(doc, nil)
	return nil
}
