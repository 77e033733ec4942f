package main

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

// TestLineHandler: a log record is one `composebox: <level>: <message> key=value...` line, as
// the CLI's errors are, with the attributes of the logger and of the call, below the level
// nothing; a server's log starts each line with the time.
func TestLineHandler(t *testing.T) {
	var b strings.Builder
	log := slog.New(newLineHandler(&b, slog.LevelWarn)).With("task", "web")
	log.Info("too quiet")
	log.Warn("variable is not set", "variable", "X", "set_with", "--var X=VALUE")
	log.WithGroup("g").Error("boom", "n", 1)
	want := "composebox: warn: variable is not set task=web variable=X set_with=\"--var X=VALUE\"\n" +
		"composebox: error: boom task=web g.n=1\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	slog.New(newLineHandler(&b, slog.LevelInfo).stamped()).Info("listening")
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+Z composebox: info: listening\n$`).MatchString(b.String()) {
		t.Errorf("stamped: %q", b.String())
	}
}
