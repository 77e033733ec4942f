package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
)

func newPsCmd(g *globals) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "ps -p PROJECT",
		Short: "Show the state of a sample's services",
		Long: `Prints one row per service of the sample, running or not: its container, state (running,
exited, ...), health (healthy, unhealthy, starting, or - without a healthcheck), exit code and
published ports. The default service comes first. COMPOSEBOX_PROJECT stands in for -p.

With --json, prints {"project": ..., "services": [{service, container, default, state, health,
exit_code, oom_killed, status, ports}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := projectOf("ps", project)
			if err != nil {
				return err
			}
			o, err := g.bareOrchestrator()
			if err != nil {
				return err
			}
			defer o.Close()
			services, err := o.Ps(cmd.Context(), p)
			if err != nil {
				return err
			}
			g.setResult(psDoc{Project: p, Services: services}, func(w io.Writer) error { return psTable(w, services) })
			return nil
		},
	}
	cmd.Flags().StringVarP(&project, "project", "p", "", "the sample's project name")
	return cmd
}

// psDoc is the JSON shape of `ps`.
type psDoc struct {
	Project  string                       `json:"project"`
	Services []orchestrator.ServiceStatus `json:"services"`
}

func psTable(w io.Writer, services []orchestrator.ServiceStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tCONTAINER\tSTATE\tHEALTH\tEXIT\tPORTS")
	for _, s := range services {
		name := s.Service
		if s.Default {
			name += " (default)"
		}
		exit := "-"
		if s.State == "exited" || s.State == "dead" {
			exit = fmt.Sprint(s.ExitCode)
			if s.OOMKilled {
				exit += " (OOM)"
			}
		}
		ports := make([]string, len(s.Ports))
		for i, p := range s.Ports {
			ports[i] = fmt.Sprintf("%s:%d->%d/%s", p.HostIP, p.HostPort, p.ContainerPort, p.Protocol)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, s.Container, s.State, dash(s.Health), exit, dash(strings.Join(ports, ",")))
	}
	return tw.Flush()
}
