package testutil

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// CancelDuringRunStep checks that a build stops within 2 s of its ctx being cancelled while a
// `RUN sleep ...` step runs, and that nothing it made stays. The Dockerfile must have a
// `LABEL marker` step before that RUN step: the step's container carries the label of the image
// it runs on, and so do the images the build commits. done gets the build's error; what names
// the operation in failures ("build", "task init").
func CancelDuringRunStep(t *testing.T, c client.APIClient, marker string, cancel context.CancelFunc, done <-chan error, what string) {
	t.Helper()
	running := func() bool {
		list, _ := c.ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", marker))})
		for _, ctr := range list {
			if strings.Contains(ctr.Command, "sleep") {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(60 * time.Second); !running(); {
		select {
		case err := <-done:
			t.Fatalf("%s ended before the build's RUN step ran: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the build's RUN step never started")
		}
	}
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", what, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s returned %v after its ctx was cancelled, want at most 2s", what, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a cancelled %s did not return within 10s", what)
	}
	// The daemon stops the step once its client has gone; nothing the build made stays.
	for deadline := time.Now().Add(20 * time.Second); ; {
		imgs := LabelledImages(t, c, marker)
		if len(imgs) == 0 && !running() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after cancellation: images %v left, step still running %v", imgs, running())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
