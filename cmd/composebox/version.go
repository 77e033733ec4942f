package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/lifecycle"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print composebox's version and the compose library it embeds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := map[string]string{"version": version, "go": runtime.Version(), "compose": lifecycle.ComposeVersion()}
			g.setResult(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "composebox %s (%s, compose %s)\n", v["version"], v["go"], v["compose"])
				return err
			})
			return nil
		},
	}
}
