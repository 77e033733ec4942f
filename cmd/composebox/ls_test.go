package main

import (
	"strings"
	"testing"
)

func TestLsTable(t *testing.T) {
	o := newLib(t)
	task := uniqueTask("table")
	s := samples(t, o, task, keepAlive, 1)[0]
	code, out, errOut := runCLI(t, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "PROJECT ") || !strings.Contains(lines[0], "STATUS") {
		t.Errorf("header %q", lines[0])
	}
	var row string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, s.Project()+" ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) != 12 || f[1] != task || f[3] != "alive" || f[4] != "ok" || f[7] != "1" || f[11] != "-" {
		t.Errorf("row %q: want the project, its task, alive, ok, 1 container, no port", row)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1 kB", 1500: "1.5 kB", 2_345_678: "2.35 MB", 10_100_000_000: "10.1 GB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
