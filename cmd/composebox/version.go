package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/composebox/composebox/orchestrator"
)

// version and commit are set at build time with -ldflags "-X main.version=... -X
// main.commit=...": make build takes the version from the repository's VERSION file, the one
// the Python package has too.
var (
	version = ""
	commit  = ""
)

// currentVersion is composebox's version: the build's, else (go install of a tagged module) the
// module's, else "dev".
func currentVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionLine is the line `composebox version` and `composebox --version` print.
func versionLine() string {
	if commit != "" {
		return fmt.Sprintf("composebox %s (commit %s, %s, compose %s)", currentVersion(), commit, runtime.Version(), orchestrator.ComposeVersion())
	}
	return fmt.Sprintf("composebox %s (%s, compose %s)", currentVersion(), runtime.Version(), orchestrator.ComposeVersion())
}

// addVersionFlag gives the root command --version, which prints what the version verb prints.
func addVersionFlag(root *cobra.Command) {
	root.Version = currentVersion()
	root.SetVersionTemplate(versionLine() + "\n")
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print composebox's version and the compose library it embeds",
		Long:  "Prints composebox's version (also --version), the commit it was built from, Go's version and the compose library's.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc := map[string]string{"version": currentVersion(), "go": runtime.Version(), "compose": orchestrator.ComposeVersion()}
			if commit != "" {
				doc["commit"] = commit
			}
			g.setResult(doc, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, versionLine())
				return err
			})
			return nil
		},
	}
}
