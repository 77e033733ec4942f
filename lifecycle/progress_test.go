package lifecycle

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

type progressCall struct{ service, status string }

type progressLog struct {
	mu    sync.Mutex
	calls []progressCall
}

func (l *progressLog) add(service, status string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, progressCall{service, status})
}

func TestProgressSinkDispatchesByProject(t *testing.T) {
	var s progressSink
	var a, b progressLog
	stopA := s.subscribe("cbx-task-ab12cd34", []string{"default", "db-main"}, a.add)
	stopB := s.subscribe("cbx-task", []string{"ab12cd34-web", "x"}, b.add)
	line := func(id, status string) string {
		return fmt.Sprintf(`{"id":%q,"status":%q}`+"\n", id, status)
	}
	writes := []string{
		line("Container cbx-task-ab12cd34-default-1", "Creating"),
		line("Container cbx-task-ab12cd34-db-main-1", "Created"),
		// Two lines in one write.
		line("Container cbx-task-ab12cd34-default-1", "Created") + line("Container cbx-task-ab12cd34-default-1", "Started"),
		// The other project, whose name is a prefix of the first one's.
		line("Container cbx-task-x-1", "Starting"),
		line("Container cbx-task-ab12cd34-web-1", "Started"),
		// Not subscribed, not a container, garbage, a partial line, a tail message.
		line("Container cbx-other-ab12cd34-default-1", "Created"),
		line("Network cbx-task-ab12cd34_default", "Created"),
		"not json at all\n",
		`{"id":"Container cbx-task-ab12cd34-default-1","sta`,
		`{"tail":true,"text":"Container cbx-task-ab12cd34-default-1"}` + "\n",
		`{"id":"Container cbx-task-ab12cd34-nosuch-1","status":"Created"}` + "\n",
		`{"id":"Container cbx-task-ab12cd34-default","status":"Created"}` + "\n",
		"\n\n",
		// Too long to parse, though well formed.
		fmt.Sprintf(`{"id":"Container cbx-task-ab12cd34-default-1","status":"Error","text":%q}`+"\n", strings.Repeat("x", maxProgressLine)),
	}
	for _, w := range writes {
		if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("write = %d, %v; want %d, nil", n, err, len(w))
		}
	}
	wantA := []progressCall{{"default", "creating"}, {"db-main", "created"}, {"default", "created"}, {"default", "started"}}
	if fmt.Sprint(a.calls) != fmt.Sprint(wantA) {
		t.Errorf("project a got %v, want %v", a.calls, wantA)
	}
	wantB := []progressCall{{"x", "starting"}, {"ab12cd34-web", "started"}}
	if fmt.Sprint(b.calls) != fmt.Sprint(wantB) {
		t.Errorf("project b got %v, want %v", b.calls, wantB)
	}
	if got := s.rest.String(); got != "not json at all\n" {
		t.Errorf("diagnostics tail = %q, want only the non-JSON line", got)
	}

	// After unsubscribing, lines are dropped.
	stopA()
	stopA() // twice is harmless
	_, _ = s.Write([]byte(line("Container cbx-task-ab12cd34-default-1", "Removed")))
	if len(a.calls) != len(wantA) {
		t.Errorf("a call after unsubscribe: %v", a.calls)
	}
	stopB()
	if n := s.n.Load(); n != 0 || len(s.subs) != 0 {
		t.Errorf("%d subscriptions left (%d in the map)", n, len(s.subs))
	}
}

func TestProgressSinkBoundsDiagnostics(t *testing.T) {
	var s progressSink
	chunk := strings.Repeat("w", 1000) + "\n"
	for range 3000 {
		_, _ = s.Write([]byte(chunk))
	}
	if n := len(s.rest.String()); n > 1<<20+len(chunk) {
		t.Errorf("diagnostics tail grew to %d bytes", n)
	}
}

func BenchmarkProgressSinkLine(b *testing.B) {
	var s progressSink
	stop := s.subscribe("cbx-task-ab12cd34", []string{"default"}, func(string, string) {})
	defer stop()
	p := []byte(`{"id":"Container cbx-task-ab12cd34-default-1","status":"Started"}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Write(p)
	}
}
