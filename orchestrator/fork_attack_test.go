package orchestrator_test

import (
	"strings"
	"testing"

	"github.com/composebox/composebox/orchestrator"
)

// forkROTask adds, to forkTask's two services, the site volume mounted read-only in the
// default sandbox: the policy of the task says the agent reads it and cannot change it.
var forkROTask = strings.Replace(forkTask, `
    command: ["tail", "-f", "/dev/null"]
`, `
    command: ["tail", "-f", "/dev/null"]
    volumes: ["site:/site:ro"]
`, 1)

// TestAttackForkCannotReachSourceOrSibling is the agent in a fork: it knows the addresses of
// the source's and a sibling fork's web server, and tries them, and tries to write the volume
// it was given read-only. Each fork has its own firewalled networks.
func TestAttackForkCannotReachSourceOrSibling(t *testing.T) {
	if !strings.Contains(forkROTask, "site:/site:ro") {
		t.Fatal("forkROTask lost its read-only mount: forkTask's default service changed")
	}
	o, _ := newOrchestrator(t)
	task := taskInit(t, o, orchestrator.TaskSpec{Name: "fork-attack", YAML: []byte(forkROTask)})
	src := startSamples(t, task, 1)[0]
	sh(t, sandbox(t, src, "web"), "echo root:secret > /www/passwd")
	forks, err := src.Fork(t.Context(), 2)
	for _, f := range forks {
		t.Cleanup(func() { _ = f.Cleanup(t.Context()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	webIP := func(s *orchestrator.Sample) string {
		info, err := o.Client().ContainerInspect(t.Context(), sandbox(t, s, "web").ContainerID())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range info.NetworkSettings.Networks {
			return n.IPAddress
		}
		t.Fatalf("web of %s has no network", s.Project())
		return ""
	}
	attacker := forks[0].Default()
	// The control: the fork's own web answers, by name and by address.
	if ok, out := fetch(t, attacker, "web", 80); !ok || out == "" {
		t.Fatalf("the fork cannot fetch its own web: %v %q", ok, out)
	}
	if ok, _ := fetch(t, attacker, webIP(forks[0]), 80); !ok {
		t.Fatal("the fork cannot fetch its own web by address")
	}
	for _, victim := range []*orchestrator.Sample{src, forks[1]} {
		if ok, out := fetch(t, attacker, webIP(victim), 80); ok {
			t.Errorf("the fork reached %s's web: %q", victim.Project(), out)
		}
	}
	for _, f := range forks {
		nets := projectNetworks(t, o, f.Project())
		if len(nets) == 0 {
			t.Errorf("fork %s has no network of its own", f.Project())
		}
		for _, n := range nets {
			if !hasRule(t, n) {
				t.Errorf("fork %s's network %s has no host firewall rule", f.Project(), n.Name)
			}
		}
	}
	res, err := attacker.Exec(t.Context(), orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "echo owned > /site/passwd"}})
	if err != nil || res.ExitCode == 0 {
		t.Errorf("the fork wrote the volume its policy mounts read-only: %v %+v", err, res)
	}
	if got := sh(t, sandbox(t, forks[0], "web"), "cat /www/passwd"); got != "root:secret\n" {
		t.Errorf("the read-only volume's content is %q", got)
	}
}
