package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// talkative prints to both streams, then stays up; side prints one line.
const talkative = `
services:
  default:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo hello-out; echo hello-err >&2; exec tail -f /dev/null"]
  side:
    image: ${COMPOSEBOX_BASE_IMAGE}
    command: ["sh", "-c", "echo side-line; exec tail -f /dev/null"]
`

// syncBuffer is a bytes.Buffer safe to read while the CLI writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogs(t *testing.T) {
	o := newLib(t)
	p := samples(t, o, uniqueTask("logs"), talkative, 1)[0].Project()
	if !poll(30e9, func() bool {
		_, out, _ := runCLI(t, "logs", "-p", p)
		return strings.Contains(out, "hello-out") && strings.Contains(out, "side-line")
	}) {
		t.Fatal("the services' first lines never showed in logs")
	}
	code, out, errOut := runCLI(t, "logs", "-p", p, "default")
	if code != 0 || out != "hello-out\n" || errOut != "hello-err\n" {
		t.Errorf("logs default: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Several services: each line names its service, padded as compose pads it.
	code, out, errOut = runCLI(t, "logs", "-p", p)
	if code != 0 || !strings.Contains(out, "default | hello-out\n") || !strings.Contains(out, "side    | side-line\n") || errOut != "default | hello-err\n" {
		t.Errorf("logs: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "logs", "-p", p, "-t", "--tail", "1", "side")
	if code != 0 || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z side-line\n$`).MatchString(out) {
		t.Errorf("logs -t --tail 1 side: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, "logs", "-p", p, "--tail", "0", "side"); code != 0 || out != "" {
		t.Errorf("logs --tail 0: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, "logs", "-p", p, "--since", "2099-01-01", "side"); code != 0 || out != "" {
		t.Errorf("logs --since in the future: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, "logs", "-p", p, "--since", "1h", "side"); code != 0 || out != "side-line\n" {
		t.Errorf("logs --since 1h: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, "logs", "--json", "-p", p, "default")
	var doc logsDoc
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Lines) != 2 ||
		doc.Lines[0] != (logsLine{"default", "stdout", "hello-out"}) || doc.Lines[1] != (logsLine{"default", "stderr", "hello-err"}) {
		t.Errorf("logs --json: exit %d, %s", code, out)
	}

	// -f streams what comes next, and stops when its context does.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var fout syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"logs", "-p", p, "-f", "--tail", "0", "side"}, strings.NewReader(""), &fout, &fout)
	}()
	if !poll(30e9, func() bool {
		// PID 1 is the init; its stdout is the container's log.
		runCLI(t, "exec", "-p", p, "-s", "side", "--", "sh", "-c", "echo later-line >/proc/1/fd/1")
		return strings.Contains(fout.String(), "later-line\n")
	}) {
		t.Fatalf("logs -f did not show a new line: %q", fout.String())
	}
	if strings.Contains(fout.String(), "side-line") {
		t.Errorf("logs -f --tail 0 showed old lines: %q", fout.String())
	}
	cancel()
	<-done

	for _, args := range [][]string{{"logs", "-p", p, "nosuch"}, {"logs", "-p", p + "x"}} {
		if code, _, errOut := runCLI(t, args...); code != exitFailure || !strings.Contains(errOut, "not_found") {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
	if _, _, errOut := runCLI(t, "logs", "-p", p+"x"); !strings.Contains(errOut, "did you mean "+p) {
		t.Errorf("a misspelt project is not given its near name: %s", errOut)
	}
}

func TestPsShowsAKilledService(t *testing.T) {
	o := newLib(t)
	task := uniqueTask("ps")
	s := samples(t, o, task, twoServices, 1)[0]
	p := s.Project()
	// A detached sample's marker volume is not one of its volumes.
	if err := s.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := lsJSON(t, task)[p]; got.Health != "ok" || got.Running != 2 || got.Volumes != 0 || got.Status != "detached" {
		t.Errorf("ls before the kill: %+v", got)
	}
	code, out, errOut := runCLI(t, "ps", "-p", p)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(rows) != 3 || !strings.HasPrefix(rows[1], "default (default) ") || !strings.Contains(rows[2], " running ") {
		t.Fatalf("ps: exit %d\n%s%s", code, out, errOut)
	}
	var side string
	for _, s := range mustPs(t, p) {
		if s.Service == "side" {
			side = s.Container
		}
	}
	if err := engineClient(t, o).ContainerKill(t.Context(), side, "KILL"); err != nil {
		t.Fatal(err)
	}
	if !poll(10e9, func() bool {
		for _, s := range mustPs(t, p) {
			if s.Service == "side" {
				return s.State == "exited" && s.ExitCode == 137
			}
		}
		return false
	}) {
		t.Fatalf("ps never showed side exited 137: %+v", mustPs(t, p))
	}
	_, out, _ = runCLI(t, "ps", "-p", p)
	if !regexp.MustCompile(`(?m)^side\s+\S+\s+exited\s+-\s+137\s`).MatchString(out) {
		t.Errorf("ps table after the kill:\n%s", out)
	}
	if got := lsJSON(t, task)[p]; got.Health != "side:exited(137)" || got.Running != 1 {
		t.Errorf("ls after the kill: health %q, running %d", got.Health, got.Running)
	}
	if code, out, _ := runCLI(t, "ls", "-q", "--task", task); code != 0 || out != p+"\n" {
		t.Errorf("ls -q --task: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, "ls", "-q", "--task", task+"-none"); code != 0 || out != "" {
		t.Errorf("ls -q --task of another task: exit %d, %q", code, out)
	}
}

func mustPs(t *testing.T, project string) []psService {
	t.Helper()
	code, out, errOut := runCLI(t, "ps", "--json", "-p", project)
	var doc struct{ Services []psService }
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("ps --json: exit %d\n%s%s", code, out, errOut)
	}
	return doc.Services
}

type psService struct {
	Service, Container, State, Health string
	ExitCode                          int `json:"exit_code"`
	Default                           bool
}
