package orchestrator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// A one-shot command in a fresh container, as `docker run --rm` gives: the workspace is
// bind-mounted at /workspace, so the command's edit is on the host when Run returns, and the
// container is gone.
func ExampleOrchestrator_Run() {
	ctx := context.Background()
	state, _ := os.MkdirTemp("", "cbx-state")
	defer os.RemoveAll(state)
	o, err := orchestrator.New(orchestrator.WithStateDir(state))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close()

	ws, _ := os.MkdirTemp("", "workspace")
	defer os.RemoveAll(ws)
	spec := orchestrator.ContainerSpec{Workspace: ws, MemoryMB: 256, CPUs: 1} // no network by default
	res, err := o.Run(ctx, spec, []string{"sh", "-c", "echo hello > greeting.txt; cat greeting.txt; exit 3"},
		orchestrator.RunOptions{Timeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	onHost, _ := os.ReadFile(filepath.Join(ws, "greeting.txt"))
	fmt.Printf("exit %d, stdout %q, on the host %q\n", res.ExitCode, res.StdoutText(), onHost)
	// Output: exit 3, stdout "hello\n", on the host "hello\n"
}

// A session: one keep-alive container, prepared by its setup commands,
// that any number of commands go to until Cleanup. Start gives a process to stream, poll and
// kill.
func ExampleOrchestrator_Spawn() {
	ctx := context.Background()
	state, _ := os.MkdirTemp("", "cbx-state")
	defer os.RemoveAll(state)
	o, err := orchestrator.New(orchestrator.WithStateDir(state))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close()

	spec := orchestrator.ContainerSpec{Setup: []string{"echo ready > /tmp/state; echo setting up"}}
	s, err := o.Spawn(ctx, spec, orchestrator.SpawnOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Cleanup(ctx)
	fmt.Printf("setup said %q\n", s.SetupStdout())

	res, err := s.Exec(ctx, orchestrator.ExecRequest{Cmd: []string{"cat", "/tmp/state"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("exec said %q\n", res.StdoutText())

	p, err := s.Start(ctx, orchestrator.ExecRequest{Cmd: []string{"sh", "-c", "echo working; exec sleep 60"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ev := <-p.Events()
	fmt.Printf("streamed %q, running: %v\n", ev.Data, s.Poll() == nil)
	_ = s.Kill(ctx)
	fmt.Printf("after kill, finished: %v\n", s.Poll() != nil)
	// Output:
	// setup said "setting up\n"
	// exec said "ready\n"
	// streamed "working\n", running: true
	// after kill, finished: true
}
