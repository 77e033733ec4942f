package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/moby/term"

	"github.com/composebox/composebox/orchestrator"
)

// terminal sets req up for a TTY exec: its first size is the local terminal's, window-size
// changes (SIGWINCH) are passed on, and with interactive stdin on a terminal that terminal goes
// raw, so keystrokes (Ctrl-C included) reach the command as typed. restore undoes it all.
func (g *globals) terminal(req *orchestrator.ExecRequest, interactive bool) (restore func(), err error) {
	req.TTY = true
	in, inTerm := terminalFd(g.stdin)
	out, outTerm := terminalFd(g.stdout)
	sizeFd, haveSize := out, outTerm
	if inTerm {
		sizeFd, haveSize = in, true
	}
	size := func() (orchestrator.WindowSize, bool) {
		if !haveSize {
			return orchestrator.WindowSize{}, false
		}
		ws, err := term.GetWinsize(sizeFd)
		if err != nil {
			return orchestrator.WindowSize{}, false
		}
		return orchestrator.WindowSize{Rows: uint(ws.Height), Cols: uint(ws.Width)}, true
	}
	if sz, ok := size(); ok {
		req.Size = sz
	}
	var undo []func()
	restore = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if haveSize {
		resize := make(chan orchestrator.WindowSize, 1)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-winch:
					if sz, ok := size(); ok {
						select {
						case resize <- sz:
						default: // one pending is enough: the latest size is read when it is sent
						}
					}
				}
			}
		}()
		req.Resize = resize
		undo = append(undo, func() { signal.Stop(winch); close(stop) })
	}
	if interactive && inTerm {
		state, err := term.SetRawTerminal(in)
		if err != nil {
			restore()
			return nil, fmt.Errorf("exec -it: put the terminal in raw mode: %w", err)
		}
		undo = append(undo, func() { _ = term.RestoreTerminal(in, state) })
	}
	return restore, nil
}

// terminalFd is f's descriptor when it is a terminal.
func terminalFd(v any) (uintptr, bool) {
	f, ok := v.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return 0, false
	}
	return f.Fd(), true
}
