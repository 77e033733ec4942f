package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/lifecycle"
	"github.com/composebox/composebox/orchestrator"
)

// sampleEvents is what the orchestrator reports for a two-service sample that builds one
// image, has each container created and started, becomes healthy and is removed.
func sampleEvents(p *progress) {
	obs := p.observer()
	p.building()
	obs(orchestrator.Event{Kind: orchestrator.EventImageBuilt, Service: "web", Duration: 1500 * time.Millisecond})
	p.set(taskRow, stReady, "t")
	for _, s := range []string{"default", "web"} {
		p.set(s, stPending, "")
	}
	step := func(service, msg string) {
		obs(orchestrator.Event{Kind: orchestrator.EventServiceProgress, Project: "t-1", Service: service, Message: msg})
	}
	step("web", "created")
	step("default", "created")
	step("web", "starting")
	step("web", "started")
	obs(orchestrator.Event{Kind: orchestrator.EventServiceReady, Project: "t-1", Service: "web", Duration: time.Second})
	step("web", "started") // late: web stays healthy
	step("default", "starting")
	obs(orchestrator.Event{Kind: orchestrator.EventSampleStarted, Project: "t-1"})
	obs(orchestrator.Event{Kind: orchestrator.EventServiceReady, Project: "t-1", Service: "default", Duration: 2 * time.Second})
	obs(orchestrator.Event{Kind: orchestrator.EventSampleRemoved, Project: "t-1"})
}

// Without a terminal, each change is one plain line, in order.
func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	sampleEvents(newProgress(&b, progressPlain))
	want := strings.Join([]string{
		"composebox: task: building",
		"composebox: web: built (image in 1.5s)",
		"composebox: task: ready (t)",
		"composebox: default: pending",
		"composebox: web: pending",
		"composebox: web: created",
		"composebox: default: created",
		"composebox: web: starting",
		"composebox: web: started",
		"composebox: web: healthy (after 1s)",
		"composebox: default: starting",
		"composebox: default: started",
		"composebox: default: healthy (after 2s)",
		"composebox: web: removed",
		"composebox: default: removed",
	}, "\n") + "\n"
	if b.String() != want {
		t.Errorf("plain progress:\n%s\nwant:\n%s", b.String(), want)
	}
}

// On a terminal, the table is redrawn in place: each redraw moves the cursor back up over the
// previous one and clears each line, so the screen ends with one row per subject in its last
// status.
func TestProgressLiveTableRedrawsInPlace(t *testing.T) {
	var b bytes.Buffer
	sampleEvents(newProgress(&b, progressTTY))
	out := b.String()
	if !strings.Contains(out, "\x1b[3A") || !strings.Contains(out, "\x1b[2K") {
		t.Fatalf("no cursor-up and clear-line sequences: %q", out)
	}
	// Replay the drawing on a virtual screen.
	var screen []string
	row := 0
	for _, tok := range regexp.MustCompile(`\x1b\[(\d+)A|\r\x1b\[2K([^\n]*)\n`).FindAllStringSubmatch(out, -1) {
		if tok[1] != "" {
			var n int
			for _, ch := range tok[1] {
				n = n*10 + int(ch-'0')
			}
			row -= n
			continue
		}
		for len(screen) <= row {
			screen = append(screen, "")
		}
		screen[row] = strings.Join(strings.Fields(tok[2]), " ")
		row++
	}
	want := []string{"task ready t", "web removed", "default removed"}
	if strings.Join(screen, "|") != strings.Join(want, "|") {
		t.Errorf("final screen %q, want %q", screen, want)
	}
}

// none prints nothing; auto on a buffer (not a terminal) is plain.
func TestProgressModes(t *testing.T) {
	var b bytes.Buffer
	sampleEvents(newProgress(&b, progressNone))
	if b.Len() != 0 {
		t.Errorf("--progress none printed %q", b.String())
	}
	if p := newProgress(&b, progressAuto); p.tty || p.off {
		t.Errorf("auto on a buffer: tty %t, off %t; want plain", p.tty, p.off)
	}
}

// A failed sample blames the service that failed, not the ones that only waited for it; a
// service is reported healthy once however often that is said; a warm take ends healthy.
func TestProgressBlamesTheFailedService(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, progressPlain)
	obs := p.observer()
	for _, s := range []string{"default", "db"} {
		p.set(s, stPending, "")
	}
	obs(orchestrator.Event{Kind: orchestrator.EventServiceReady, Service: "db", Duration: time.Second})
	obs(orchestrator.Event{Kind: orchestrator.EventServiceReady, Service: "db", Duration: 2 * time.Second})
	nr := &lifecycle.NotReadyError{Reason: "exited", Services: []lifecycle.ServiceState{
		{Service: "db", State: "exited", ExitCode: 3}, {Service: "default", State: "created"}}}
	obs(orchestrator.Event{Kind: orchestrator.EventSampleFailed, Err: fmt.Errorf("sample init: %w", nr)})
	got := b.String()
	if strings.Count(got, "db: healthy") != 1 || !strings.Contains(got, "composebox: db: failed (exited, exit code 3)\n") ||
		!strings.Contains(got, "composebox: default: blocked (not started: a dependency failed)\n") || strings.Contains(got, "default: failed") {
		t.Errorf("plain progress:\n%s", got)
	}

	b.Reset()
	p = newProgress(&b, progressPlain)
	p.set("default", stPending, "")
	p.observer()(orchestrator.Event{Kind: orchestrator.EventPoolTaken})
	if got := b.String(); !strings.Contains(got, "composebox: default: healthy (from the warm pool)\n") {
		t.Errorf("warm take:\n%s", got)
	}
}
