package lifecycle

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
)

// The compose library reports each container it creates and starts ("Container
// <project>-<service>-<n>": Creating, Created, Starting, Started, ...) through a progress
// writer it builds afresh for every call, from a process-wide mode. The engine sets that mode
// to JSON, which writes one JSON line per step, with a single Write, to the engine's own
// output stream: progressSink. It hands each line to the Up in flight for that project, if
// any, and drops it otherwise, so nothing reaches the process's stdout or stderr and nothing
// piles up in memory.

// maxProgressLine bounds the lines progressSink parses: a container step is about 100 bytes;
// anything much longer (an error event with a long text) is dropped unread.
const maxProgressLine = 4 << 10

// progressSink is the compose library's output stream. It is safe for concurrent use: every
// project's Up writes to it at once.
type progressSink struct {
	// n is how many subscriptions exist, read before anything else so that a line nobody
	// listens to costs one atomic load.
	n    atomic.Int32
	mu   sync.RWMutex
	subs map[string]*progressSub
	// rest keeps a bounded tail of whatever compose wrote that is not a progress line, for
	// diagnostics.
	rest lockedBuffer
}

type progressSub struct {
	services map[string]bool
	fn       func(service, status string)
}

// subscribe sends the progress of project's containers of these services to fn until the
// returned function is called. fn is called synchronously from compose's goroutines, possibly
// at once from several of them.
func (s *progressSink) subscribe(project string, services []string, fn func(service, status string)) (cancel func()) {
	sub := &progressSub{services: make(map[string]bool, len(services)), fn: fn}
	for _, n := range services {
		sub.services[n] = true
	}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[string]*progressSub{}
	}
	if _, ok := s.subs[project]; !ok {
		s.n.Add(1)
	}
	s.subs[project] = sub
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.subs[project] == sub {
			delete(s.subs, project)
			s.n.Add(-1)
		}
		s.mu.Unlock()
	}
}

// Write takes one or more whole lines (compose writes each progress line with one call).
func (s *progressSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		s.line(line)
	}
	return n, nil
}

func (s *progressSink) line(line []byte) {
	if len(line) == 0 {
		return
	}
	if line[0] != '{' {
		// Not a progress line: a warning compose printed itself.
		_, _ = s.rest.Write(append(line[:len(line):len(line)], '\n'))
		return
	}
	if s.n.Load() == 0 || len(line) > maxProgressLine || !bytes.Contains(line, containerID) {
		return
	}
	var m struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	name, ok := strings.CutPrefix(m.ID, "Container ")
	if !ok || m.Status == "" {
		return
	}
	sub, service := s.lookup(name)
	if sub != nil {
		sub.fn(service, progressStatus(m.Status))
	}
}

var containerID = []byte(`"id":"Container `)

// lookup finds the subscription and service of a container named <project>-<service>-<n>.
// Project and service names may both contain dashes, so each split is tried; the service must
// be one of the project's.
func (s *progressSink) lookup(name string) (*progressSub, string) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return nil, ""
	}
	rest := name[:i] // <project>-<service>
	s.mu.RLock()
	defer s.mu.RUnlock()
	for j := strings.IndexByte(rest, '-'); j > 0; {
		if sub, ok := s.subs[rest[:j]]; ok && sub.services[rest[j+1:]] {
			return sub, rest[j+1:]
		}
		k := strings.IndexByte(rest[j+1:], '-')
		if k < 0 {
			break
		}
		j += k + 1
	}
	return nil, ""
}

// progressStatus turns compose's status text into the lower-case word composebox reports.
func progressStatus(s string) string {
	switch s {
	case "Creating":
		return "creating"
	case "Created":
		return "created"
	case "Starting":
		return "starting"
	case "Started":
		return "started"
	case "Running":
		return "running"
	case "Healthy":
		return "healthy"
	case "Waiting":
		return "waiting"
	case "Recreate":
		return "recreating"
	case "Recreated":
		return "recreated"
	case "Error":
		return "error"
	}
	return strings.ToLower(s)
}
