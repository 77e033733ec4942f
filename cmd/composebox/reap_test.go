package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/composebox/composebox/internal/testutil"
)

// The hidden `reap` verb runs the watchdog in the foreground.
func TestReapVerb(t *testing.T) {
	c := testutil.Docker(t)
	task := uniqueTask("reapverb")
	removeTaskProjects(t, c, task)
	owner := startOwner(t, "own", task)
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runCLI(t, "reap", "--json", "--owner", owner.owner, "--interval", "50ms")
		done <- result{code, out, errOut}
	}()
	select {
	case r := <-done:
		t.Fatalf("reap returned while its owner lives: %+v", r)
	default:
	}
	owner.kill()
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute): // a hang detector: removal is slow on a loaded machine
		t.Fatal("reap did not return within 2 minutes of the owner's death")
	}
	var got reapJSON
	if r.code != 0 || json.Unmarshal([]byte(r.out), &got) != nil {
		t.Fatalf("reap: exit %d\n%s%s", r.code, r.out, r.err)
	}
	var names []string
	for _, p := range got.Projects {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{owner.project}) {
		t.Errorf("reaped %v, want %s", names, owner.project)
	}
	if n := testutil.Resources(t, c, taskLabel(task)); n != 0 {
		t.Errorf("%d resources left", n)
	}
}

func TestReapVerbUsage(t *testing.T) {
	for _, args := range [][]string{{"reap"}, {"reap", "--owner", "nonsense"}} {
		code, _, errOut := runCLI(t, args...)
		if code != exitUsage || !strings.HasPrefix(errOut, "composebox: usage: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
