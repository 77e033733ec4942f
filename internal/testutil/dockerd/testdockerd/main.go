// Command testdockerd starts private Docker daemons (package dockerd) for tests written in
// another language, which cannot call the Go helpers: the Python tests of the inspect_ai
// provider on several engines. It prints one line "engine NAME=ENDPOINT" per daemon, then
// "ready", and when its stdin ends (its parent closed it, or died) it stops the daemons and
// removes everything they had.
//
//	testdockerd -n 2 -prefix cbxpi
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/composebox/composebox/internal/testutil/dockerd"
)

func main() {
	n := flag.Int("n", 2, "how many daemons")
	prefix := flag.String("prefix", "cbxpt", "prefix of the daemons' directories, bridges and names")
	flag.Parse()
	if err := dockerd.Available(); err != nil {
		fmt.Fprintln(os.Stderr, "testdockerd:", err)
		os.Exit(1)
	}
	daemons := make([]*dockerd.Daemon, *n)
	errs := make([]error, *n)
	var wg sync.WaitGroup
	for i := range daemons {
		wg.Go(func() {
			daemons[i], errs[i] = dockerd.Start(dockerd.Options{Prefix: fmt.Sprintf("%s%c", *prefix, 'a'+i)})
		})
	}
	wg.Wait()
	stop := func() {
		for _, d := range daemons {
			if d != nil {
				d.Remove()
			}
		}
	}
	for _, err := range errs {
		if err != nil {
			stop()
			fmt.Fprintln(os.Stderr, "testdockerd:", err)
			os.Exit(1)
		}
	}
	for i, d := range daemons {
		fmt.Printf("engine %c=%s\n", 'a'+i, d.Endpoint())
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop()
}
