//go:build ignore

// Command pause is the pod sandbox process of the local Kubernetes fixture (scripts/k8s): it
// holds the pod's namespaces open, reaps the orphans that land on it as PID 1, and exits on
// SIGINT or SIGTERM. It is built static and put in an image FROM scratch, since no public
// registry can be reached to pull the usual one.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			// Reap every exited child; signals coalesce, so one SIGCHLD may stand for many.
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
