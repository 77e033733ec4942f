package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// lineHandler writes log records in the CLI's own format, the one its errors and progress use:
//
//	composebox: warn: variable is not set, defaulting to a blank string variable=X set_with="..."
//
// the level in lower case, the message, then the attributes as slog's text handler writes them
// (key=value, quoted where needed), so that stderr never mixes two formats. A server's log
// (stamped) starts each line with the time, since it is read long after it was written.
type lineHandler struct {
	w     io.Writer
	stamp bool
	mu    *sync.Mutex
	// attrs formats the attributes into buf (with those of WithAttrs and WithGroup); the time,
	// level and message are dropped, since Handle writes them itself.
	attrs slog.Handler
	buf   *bytes.Buffer
}

func newLineHandler(w io.Writer, level slog.Leveler) *lineHandler {
	buf := new(bytes.Buffer)
	drop := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}
	return &lineHandler{w: w, mu: new(sync.Mutex), buf: buf,
		attrs: slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level, ReplaceAttr: drop})}
}

func (h *lineHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.attrs.Enabled(ctx, l)
}

func (h *lineHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.Reset()
	if err := h.attrs.Handle(ctx, r); err != nil {
		return err
	}
	attrs := strings.TrimSpace(h.buf.String())
	line := "composebox: " + strings.ToLower(r.Level.String()) + ": " + r.Message
	if h.stamp {
		line = r.Time.UTC().Format(time.RFC3339Nano) + " " + line
	}
	if attrs != "" {
		line += " " + attrs
	}
	_, err := io.WriteString(h.w, line+"\n")
	return err
}

// stamped is h with the time at the start of each line.
func (h *lineHandler) stamped() *lineHandler {
	c := *h
	c.stamp = true
	return &c
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = h.attrs.WithAttrs(as)
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.attrs = h.attrs.WithGroup(name)
	return &c
}
