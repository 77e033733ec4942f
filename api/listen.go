package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/composebox/composebox/internal/errdefs"
)

// DefaultSocketPath is where the server listens by default:
// $XDG_RUNTIME_DIR/composebox/api.sock, else /run/composebox/api.sock.
func DefaultSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "composebox", "api.sock")
	}
	return "/run/composebox/api.sock"
}

// ListenUnix listens on a Unix socket at path, mode 0600, creating its directory (mode 0700)
// when it is missing. A socket file left by a server that is gone is replaced; one a live
// server answers on is ErrConflict.
func ListenUnix(path string) (net.Listener, error) {
	op := "listen on " + path
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, errdefs.New(errdefs.ErrConflict, op+": the path exists and is not a socket")
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, errdefs.New(errdefs.ErrConflict, op+": another server is listening there")
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s: remove the stale socket: %w", op, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return l, nil
}

// ListenTCP listens on addr, which must be a loopback address (127.0.0.0/8, ::1 or
// localhost) with a port: the API runs commands in sandboxes, so it is never exposed beyond
// this host.
func ListenTCP(addr string) (net.Listener, error) {
	op := "listen on " + addr
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errdefs.Wrap(errdefs.ErrInvalidConfig, err, op+": want 127.0.0.1:PORT")
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return nil, errdefs.New(errdefs.ErrInvalidConfig, op+": only a loopback address (127.0.0.1, ::1) is allowed: the API runs commands in sandboxes")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), port))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return l, nil
}

// WriteToken generates a bearer token and writes it to path (mode 0600, its directory 0700
// when created), replacing any earlier one.
func WriteToken(path string) (string, error) {
	op := "write token " + path
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	token := hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	// A fresh file, so that a mode set on an older one cannot widen the new token's.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	return token, nil
}
