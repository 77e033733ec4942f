package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/term"

	"github.com/composebox/composebox/orchestrator"
)

// Progress of up, run and cleanup goes to stderr, never stdout (that is the result's). On a
// terminal it is a live table, one row per service (or per project, for cleanup) whose status
// changes in place: building, built, pending, creating, created, starting, started, healthy,
// failed, removing, removed.
// Otherwise each change is one plain line, for logs. --progress picks a mode by hand.
const (
	progressAuto  = "auto"
	progressTTY   = "tty"
	progressPlain = "plain"
	progressNone  = "none"
)

// Row statuses.
const (
	stBuilding = "building"
	stBuilt    = "built"
	stPending  = "pending"
	stStarting = "starting"
	stStarted  = "started"
	stHealthy  = "healthy"
	stFailed   = "failed"
	stRemoving = "removing"
	stRemoved  = "removed"
	stReady    = "ready"
)

// progress renders rows of (subject, status). It is safe for concurrent use: the orchestrator
// calls its observer from several goroutines.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	off   bool
	rows  []*progressRow
	index map[string]*progressRow
	// drawn is how many lines the last live redraw printed, to move back over them.
	drawn int
	// printed are the (subject, status) pairs plain mode has printed: each is printed once,
	// however often it is reported (a warm pool's samples report the same services too).
	printed map[[2]string]bool
}

type progressRow struct {
	subject string
	status  string
	detail  string
}

// newProgress returns the renderer for mode; auto is live on a terminal, plain otherwise.
func newProgress(w io.Writer, mode string) *progress {
	p := &progress{w: w, index: map[string]*progressRow{}}
	switch mode {
	case progressNone:
		p.off = true
	case progressTTY:
		p.tty = true
	case progressPlain:
	default:
		p.tty = isTerminal(w)
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// set moves subject to status, with an optional detail, and renders the change.
func (p *progress) set(subject, status, detail string) { p.update(subject, status, detail, nil) }

// setUnless moves subject to status unless its row is already in one of the statuses unless.
func (p *progress) setUnless(subject, status string, unless ...string) {
	if subject != "" && status != "" {
		p.update(subject, status, "", unless)
	}
}

func (p *progress) update(subject, status, detail string, unless []string) {
	if p == nil || p.off {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.index[subject]
	if ok && slices.Contains(unless, r.status) {
		return
	}
	if !ok {
		r = &progressRow{subject: subject}
		p.index[subject] = r
		p.rows = append(p.rows, r)
	}
	if r.status == status && r.detail == detail {
		return
	}
	r.status, r.detail = status, detail
	if p.tty {
		p.redraw()
		return
	}
	if p.printed == nil {
		p.printed = map[[2]string]bool{}
	}
	key := [2]string{r.subject, r.status}
	if p.printed[key] {
		return
	}
	p.printed[key] = true
	line := "composebox: " + r.subject + ": " + r.status
	if detail != "" {
		line += " (" + detail + ")"
	}
	fmt.Fprintln(p.w, line)
}

// setAll moves every service's row not already in one of the statuses unless to status (the
// task's row is not a service's).
func (p *progress) setAll(status, detail string, unless ...string) {
	if p == nil || p.off {
		return
	}
	p.mu.Lock()
	var subjects []string
	for _, r := range p.rows {
		skip := r.subject == taskRow || r.subject == engineRow
		for _, u := range unless {
			skip = skip || r.status == u
		}
		if !skip {
			subjects = append(subjects, r.subject)
		}
	}
	p.mu.Unlock()
	for _, s := range subjects {
		p.update(s, status, detail, unless)
	}
}

// redraw rewrites the live table in place: back up over the last drawing, then one cleared
// line per row. Called with mu held.
func (p *progress) redraw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	width := 0
	for _, r := range p.rows {
		width = max(width, len(r.subject))
	}
	for _, r := range p.rows {
		fmt.Fprintf(&b, "\r\x1b[2K %-*s  %-9s", width, r.subject, r.status)
		if r.detail != "" {
			b.WriteString("  " + r.detail)
		}
		b.WriteByte('\n')
	}
	p.drawn = len(p.rows)
	_, _ = io.WriteString(p.w, b.String())
}

// observer turns the orchestrator's lifecycle events into rows, one per service. A sample's
// events carry its project, which a single-sample command does not need to repeat, so rows
// are named by service alone.
func (p *progress) observer() orchestrator.Observer {
	return func(e orchestrator.Event) {
		dur := e.Duration.Round(10 * time.Millisecond).String()
		switch e.Kind {
		case orchestrator.EventImageBuilt:
			p.set(e.Service, stBuilt, "image in "+dur)
		case orchestrator.EventServiceProgress:
			// A container's own step (creating, created, starting, started, ...), as compose
			// takes it; a late one never takes a row back from its outcome.
			p.setUnless(e.Service, e.Message, stHealthy, stFailed, stRemoving, stRemoved)
		case orchestrator.EventSamplePlaced:
			p.set(engineRow, e.Engine, e.Message)
		case orchestrator.EventSampleStarted:
			p.setAll(stStarted, "", stHealthy, stFailed)
		case orchestrator.EventServiceReady:
			p.set(e.Service, stHealthy, "after "+dur)
		case orchestrator.EventPoolTaken:
			// A ready sample from the warm pool: its services never pass through the steps.
			p.setAll(stHealthy, "from the warm pool", stHealthy, stFailed)
		case orchestrator.EventSampleHealthy:
			p.setAll(stHealthy, "", stHealthy, stFailed)
		case orchestrator.EventSampleFailed:
			p.blame(e.Err)
		case orchestrator.EventSampleRemoved:
			p.setAll(stRemoved, "")
		}
	}
}

// stBlocked is a service that never started because one it depends on failed.
const stBlocked = "blocked"

// blame marks the services that failed as failed, with what went wrong, and the ones that were
// only waiting for them as blocked; without the details, every service not yet healthy failed.
func (p *progress) blame(err error) {
	var nr *orchestrator.NotReadyError
	if !errors.As(err, &nr) || len(nr.Services) == 0 {
		p.setAll(stFailed, "", stHealthy)
		return
	}
	for _, s := range nr.Services {
		switch {
		case s.State == "created" || s.State == "missing":
			p.set(s.Service, stBlocked, "not started: a dependency failed")
		case s.State == "exited" || s.State == "dead":
			p.set(s.Service, stFailed, fmt.Sprintf("%s, exit code %d", s.State, s.ExitCode))
		case s.Health != "":
			p.set(s.Service, stFailed, s.Health)
		default:
			p.set(s.Service, stFailed, s.State)
		}
	}
}

// taskRow is the row of the task's preparation (its images built, or found cached).
const taskRow = "task"

// engineRow says which of several engines the sample went to, and why.
const engineRow = "engine"

// building shows the task being prepared, before TaskInit.
func (p *progress) building() { p.set(taskRow, stBuilding, "") }

// starting shows the task ready and one row per service of the sample about to start, each
// pending until its container is created.
func (p *progress) starting(task *orchestrator.Task) {
	p.set(taskRow, stReady, task.Name())
	for _, n := range task.Project().ServiceNames() {
		p.set(n, stPending, "")
	}
}
