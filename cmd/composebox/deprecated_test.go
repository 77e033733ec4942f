package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDeprecatedSpellingsStillWorkAndWarn: each flag renamed so that one spelling means one
// thing keeps its old spelling, which still sets the same value and warns on stderr naming the
// new one.
func TestDeprecatedSpellingsStillWorkAndWarn(t *testing.T) {
	t.Run("config -e is --var", func(t *testing.T) {
		code, out, errOut := runConfigCLI(t, "config", "../../testdata/projects/compose-rules/unset-variable", "-e", "CBX_REGISTRY=reg.example/")
		if code != 0 || !strings.Contains(out, "REGISTRY: '[reg.example/]'") {
			t.Fatalf("config -e: exit %d, the value did not reach interpolation:\n%s%s", code, out, errOut)
		}
		if !strings.Contains(errOut, "composebox: warn: ") || !strings.Contains(errOut, "-e/--env for interpolation is deprecated: use --var KEY=VAL") {
			t.Errorf("config -e: no deprecation warning:\n%s", errOut)
		}
	})
	t.Run("config --image SERVICE=REF is --service-image", func(t *testing.T) {
		code, out, errOut := runConfigCLI(t, "config", suite("harbor-sidecar-overlay/mqtt-retained-shadow"), "--image", "main=mirror/main:1")
		if code != 0 || !strings.Contains(out, "image: mirror/main:1") {
			t.Fatalf("config --image main=REF: exit %d:\n%s%s", code, out, errOut)
		}
		if !strings.Contains(errOut, "--image SERVICE=REF is deprecated: use --service-image SERVICE=REF") {
			t.Errorf("config --image main=REF: no deprecation warning:\n%s", errOut)
		}
	})
	// The readiness budget: the old spellings set the value --wait-timeout reads.
	for _, c := range []struct {
		verb, old string
		rest      []string
	}{{"up", "timeout", nil}, {"run", "ready-timeout", []string{"--", "true"}}} {
		t.Run(c.verb+" --"+c.old+" is --wait-timeout", func(t *testing.T) {
			var out, errb bytes.Buffer
			g := &globals{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
			cmd, _, err := newRootCmd(g).Find([]string{c.verb})
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.ParseFlags([]string{"--" + c.old, "7"}); err != nil {
				t.Fatal(err)
			}
			if got := cmd.Flags().Lookup("wait-timeout").Value.String(); got != "7s" {
				t.Errorf("%s --%s 7: --wait-timeout is %s", c.verb, c.old, got)
			}
			if !cmd.Flags().Lookup(c.old).Hidden {
				t.Errorf("%s --%s is still in the help", c.verb, c.old)
			}
			// The warning, from the command line as a user gives it (the missing task then fails).
			code, _, errOut := runCLI(t, append([]string{c.verb, "--" + c.old, "7", "./no-such-task-dir"}, c.rest...)...)
			if code == 0 || !strings.Contains(errOut, c.verb+" --"+c.old+" is deprecated: use --wait-timeout") {
				t.Errorf("%s --%s: exit %d, stderr %q; want the deprecation warning", c.verb, c.old, code, errOut)
			}
		})
	}
}
