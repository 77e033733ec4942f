package testutil

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/composebox/composebox/internal/engine"
)

// LeakCheck runs a package's tests and then leftovers, failing the run when the tests passed but
// left something behind. Use it as the whole of TestMain:
//
//	func TestMain(m *testing.M) { testutil.LeakCheck(m, leftovers) }
func LeakCheck(m *testing.M, leftovers func(ctx context.Context, c client.APIClient) error) {
	code := m.Run()
	if code == 0 {
		if err := checkLeaks(leftovers); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func checkLeaks(leftovers func(ctx context.Context, c client.APIClient) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := engine.Connect(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	return leftovers(ctx, c)
}
