package main

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestComposeHabits: what a docker compose user types works, and a failed start says why.
func TestComposeHabits(t *testing.T) {
	o := newLib(t)
	p := samples(t, o, uniqueTask("habits"), keepAlive, 1)[0].Project()
	cases := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		// Flags stop at CMD's first word: -la is ls's.
		{[]string{"exec", "-p", p, "ls", "-la", "/"}, 0, "etc", ""},
		{[]string{"exec", "-T", "-p", p, "--", "echo", "-p", "x"}, 0, "-p x", ""},
		{[]string{"exec", "-p", p, "--timeout", "1", "sleep", "30"}, exitTimeout, "", "timed out"},
		{[]string{"exec", "-p", p, "nosuchcmd"}, exitNotFound, "", "nosuchcmd"},
		{[]string{"exec", "-p", p, "-u", "nobodyx", "true"}, exitCannotRun, "", "nobodyx"},
		{[]string{"exec", "-d", "-p", p, "nosuchcmd"}, exitNotFound, "", "nosuchcmd"},
		{[]string{"exec", "--bogus", "-p", p, "true"}, exitUsage, "", "see 'composebox exec --help'"},
		{[]string{"logs", "--bogus"}, exitUsage, "", "see 'composebox logs --help'"},
		{[]string{"nosuchverb"}, exitUsage, "", "see 'composebox --help'"},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q", tc.args, code, tc.code, out, errOut)
		}
	}
	// -d returns at once and the command goes on: it waits for a file only the test writes.
	if code, _, errOut := runCLI(t, "exec", "-d", "-p", p, "sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done >/tmp/bg"); code != 0 {
		t.Fatalf("exec -d: exit %d, %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "exec", "-p", p, "touch", "/tmp/go"); code != 0 {
		t.Fatal("touch")
	}
	if !poll(10e9, func() bool {
		_, out, _ := runCLI(t, "exec", "-p", p, "cat", "/tmp/bg")
		return out == "done\n"
	}) {
		t.Error("the background command never finished its work")
	}
}

func TestParseSeconds(t *testing.T) {
	for in, want := range map[string]string{"5": "5s", "1.5": "1.5s", "300ms": "300ms", "2m": "2m0s", "0": "0s"} {
		d, err := parseSeconds(in)
		if err != nil || d.String() != want {
			t.Errorf("parseSeconds(%q) = %s, %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{"-1", "soon", ""} {
		if _, err := parseSeconds(bad); err == nil {
			t.Errorf("parseSeconds(%q) accepted", bad)
		}
	}
}

// TestComposeLogrusGoesThroughSlog: a warning the compose library logs through logrus comes out
// in composebox's own stderr format.
func TestComposeLogrusGoesThroughSlog(t *testing.T) {
	var errb strings.Builder
	g := &globals{stderr: &errb, LogLevel: "warn", SubnetPool: "10.213.0.0/16", SubnetBits: 27, Progress: progressNone}
	if err := g.setup(); err != nil {
		t.Fatal(err)
	}
	logrus.WithField("service", "web").Warn("compose says hi")
	logrus.Debug("too quiet")
	if got := errb.String(); !strings.Contains(got, `composebox: warn: compose says hi from=compose service=web`) || strings.Contains(got, "too quiet") {
		t.Errorf("stderr %q", got)
	}
}
