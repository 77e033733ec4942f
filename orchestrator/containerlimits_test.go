package orchestrator_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// A container whose file sets no limits gets the defaults: pids 4096 and a quarter of the
// engine host's memory.
func TestDefaultContainerLimits(t *testing.T) {
	o, _ := newOrchestrator(t)
	c := dockerClient(t, o)
	name := uniqueTask("limits")
	removeTaskProjects(t, c, name)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive)})
	s := startSamples(t, task, 1)[0]
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ContainerInspect(t.Context(), s.Default().ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	hc := got.HostConfig
	if hc.PidsLimit == nil || *hc.PidsLimit != orchestrator.DefaultContainerPids {
		t.Errorf("pids limit %v, want %d", hc.PidsLimit, orchestrator.DefaultContainerPids)
	}
	if want := info.MemTotal / 4; hc.Memory != want {
		t.Errorf("memory limit %d, want %d (a quarter of the host's %d)", hc.Memory, want, info.MemTotal)
	}
}

// A fork bomb and a memory hog in one sample stay inside its limits (here set low, so that the
// test cannot hurt a shared machine): the hog is OOM-killed, the bomb runs out of pids, and a
// second sample answers execs throughout.
func TestAttackForkBombAndMemoryHogAreContained(t *testing.T) {
	const memory, pids = 64 << 20, 256
	o, _ := newOrchestrator(t, orchestrator.WithLimits(orchestrator.Limits{ContainerMemory: memory, ContainerPids: pids}))
	c := dockerClient(t, o)
	name := uniqueTask("bomb")
	removeTaskProjects(t, c, name)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: name, YAML: []byte(keepAlive)})
	samples := startSamples(t, task, 2)
	attacker, bystander := samples[0].Default(), samples[1].Default()
	got, err := c.ContainerInspect(t.Context(), attacker.ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	if hc := got.HostConfig; hc.Memory != memory || hc.PidsLimit == nil || *hc.PidsLimit != pids {
		t.Fatalf("attacker's limits: memory %d, pids %v; want %d and %d", hc.Memory, hc.PidsLimit, memory, pids)
	}

	answers := func(what string) {
		t.Helper()
		r, err := bystander.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"echo", "alive"}, Timeout: 30 * time.Second})
		if err != nil || r.StdoutText() != "alive\n" {
			t.Fatalf("the other sample's exec %s: %v %+v", what, err, r)
		}
	}

	// One attack at a time: run together, the memory limit's OOM kill may take the bomb's shell
	// before its forks run out, and the test would not show which limit held.
	var wg sync.WaitGroup
	var hog, bomb orchestrator.ExecResult
	var hogErr, bombErr error
	// The hog doubles a string until the kernel kills it.
	wg.Go(func() {
		hog, hogErr = attacker.Exec(t.Context(), orchestrator.ExecRequest{
			Cmd: []string{"awk", `BEGIN { s = "x"; while (1) s = s s }`}, Timeout: time.Minute})
	})
	answers("while the memory hog runs")
	wg.Wait()
	// The bomb forks far more long-lived processes than its pids limit allows.
	wg.Go(func() {
		bomb, bombErr = attacker.Exec(t.Context(), orchestrator.ExecRequest{
			Cmd: []string{"sh", "-c", `i=0; while [ $i -lt 1000 ]; do sleep 30 & i=$((i+1)); done`}, Timeout: time.Minute})
	})
	answers("while the fork bomb runs")
	wg.Wait()
	answers("after the attack")

	if hogErr != nil || hog.ExitCode != 137 {
		t.Errorf("memory hog: %v, exit %d, stderr %q; want it killed (137)", hogErr, hog.ExitCode, hog.StderrText())
	}
	if bombErr != nil || !strings.Contains(bomb.StderrText(), "fork") {
		t.Errorf("fork bomb: %v, exit %d, stderr %q; want it to run out of forks", bombErr, bomb.ExitCode, bomb.StderrText())
	}
	top, err := c.ContainerTop(t.Context(), attacker.ContainerID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(top.Processes); n > pids || n < pids/2 {
		t.Errorf("%d processes in the attacker's container, want the bomb to have filled up to its limit of %d", n, pids)
	}
	inspect, err := c.ContainerInspect(t.Context(), attacker.ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	if !inspect.State.Running {
		t.Errorf("attacker's container state %s", inspect.State.Status)
	}
}
