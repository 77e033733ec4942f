package engine

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"time"

	"github.com/docker/docker/client"
)

// PlainTCPRisk says what an engine reached over tcp:// without TLS exposes, for warnings.
const PlainTCPRisk = "is reached over tcp:// without TLS: anyone who can reach that port drives the engine as root, " +
	"and anyone on the path reads and rewrites what composebox sends it (files, commands, their output)"

// PlainTCPFix says how to reach such an engine safely.
const PlainTCPFix = "give the engine TLS (tcp://HOST:2376?tls=CERTDIR for --engine, DOCKER_TLS_VERIFY=1 with DOCKER_CERT_PATH for DOCKER_HOST), " +
	"or reach it over ssh:// or a unix socket"

// PlainTCP reports whether c reaches its engine over tcp:// without TLS. It opens one connection
// the way c does (within timeout; 0 means DefaultPingTimeout) and looks at what it got, so it
// holds however c was configured: DOCKER_HOST with or without DOCKER_TLS_VERIFY, a context, an
// endpoint's certificate directory. An engine it cannot reach is not reported.
func PlainTCP(ctx context.Context, c client.APIClient, timeout time.Duration) bool {
	if !strings.HasPrefix(c.DaemonHost(), "tcp://") {
		return false
	}
	if timeout <= 0 {
		timeout = DefaultPingTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := make(chan net.Conn, 1)
	go func() {
		conn, err := c.Dialer()(ctx)
		if err != nil {
			conn = nil
		}
		got <- conn
	}()
	select {
	case conn := <-got:
		if conn == nil {
			return false
		}
		defer conn.Close()
		_, isTLS := conn.(*tls.Conn)
		return !isTLS
	case <-ctx.Done():
		go func() {
			if conn := <-got; conn != nil {
				conn.Close()
			}
		}()
		return false
	}
}
