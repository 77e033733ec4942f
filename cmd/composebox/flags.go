package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// deprecatedKey annotates a flag kept as an old spelling; its value is what to use instead.
const deprecatedKey = "composebox-deprecated"

// deprecate keeps flag name working as an old spelling of use, out of the help.
func deprecate(f *pflag.FlagSet, name, use string) {
	fl := f.Lookup(name)
	fl.Hidden = true
	fl.Usage = "deprecated: use " + use
	if fl.Annotations == nil {
		fl.Annotations = map[string][]string{}
	}
	fl.Annotations[deprecatedKey] = []string{use}
}

// warnDeprecated warns once for each old spelling the command line used, and for more: the
// warnings that depend on a flag's value rather than its name.
func (g *globals) warnDeprecated(cmd *cobra.Command, more ...string) {
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if use, ok := fl.Annotations[deprecatedKey]; ok {
			g.log.Warn(fmt.Sprintf("%s --%s is deprecated: use %s", cmd.Name(), fl.Name, use[0]))
		}
	})
	for _, m := range more {
		g.log.Warn(cmd.Name() + " " + m)
	}
}

// seconds is a duration flag that also takes a bare number as seconds, as compose's
// --timeout does: --timeout 5 is five seconds, --timeout 1.5 or 300ms work too.
type seconds struct{ d *time.Duration }

func (s seconds) String() string {
	if s.d == nil || *s.d == 0 {
		return "0s"
	}
	return s.d.String()
}

func (s seconds) Set(v string) error {
	d, err := parseSeconds(v)
	if err != nil {
		return err
	}
	*s.d = d
	return nil
}

func (s seconds) Type() string { return "duration" }

func parseSeconds(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return 0, fmt.Errorf("%q is negative", v)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 30s, 5m or a number of seconds", v)
	}
	return d, nil
}

// secondsVar defines a duration flag on f that takes a bare number as seconds.
func secondsVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var(seconds{p}, name, usage)
}

// projectOf is the -p flag's value, else COMPOSEBOX_PROJECT; neither is a usage error of verb.
func projectOf(verb, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p := os.Getenv("COMPOSEBOX_PROJECT"); p != "" {
		return p, nil
	}
	return "", usageError{errors.New(verb + ": -p PROJECT (or COMPOSEBOX_PROJECT) is required")}
}

// parseSince reads --since: a duration back from now (10m, or a number of seconds), an RFC 3339
// time, or a date.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := parseSeconds(v); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration (10m, 30s), an RFC 3339 time or a date", strings.TrimSpace(v))
}
