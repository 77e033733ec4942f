package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/composebox/composebox/orchestrator"
)

// getLogs streams a service's container output as NDJSON StreamEvents of type stdout and
// stderr, then one of type end (or error). Query: follow, tail (the last N lines; absent: all),
// since (RFC 3339) and timestamps.
func (s *Server) getLogs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var opts orchestrator.LogsOptions
	var err error
	if v := q.Get("follow"); v != "" {
		if opts.Follow, err = strconv.ParseBool(v); err != nil {
			return invalid("logs: follow " + strconv.Quote(v) + ": want true or false")
		}
	}
	if v := q.Get("timestamps"); v != "" {
		if opts.Timestamps, err = strconv.ParseBool(v); err != nil {
			return invalid("logs: timestamps " + strconv.Quote(v) + ": want true or false")
		}
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return invalid("logs: tail " + strconv.Quote(v) + ": want a number of lines, 0 or more")
		}
		opts.Tail = n
		if n == 0 {
			opts.Tail = -1
		}
	}
	if v := q.Get("since"); v != "" {
		if opts.Since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return invalid("logs: since " + strconv.Quote(v) + ": want an RFC 3339 time")
		}
	}
	sb, release, err := s.sandbox(r)
	if err != nil {
		return err
	}
	defer release()
	out := &eventWriter{sw: newStreamWriter(w, s.opts.WriteTimeout)}
	defer out.sw.clear()
	opts.Stdout = &streamSink{out: out, typ: "stdout"}
	opts.Stderr = &streamSink{out: out, typ: "stderr"}
	if opts.Follow {
		if err := out.begin(); err != nil {
			return nil
		}
	}
	if err := sb.Logs(r.Context(), opts); err != nil {
		if !out.started() {
			return err
		}
		if !out.failed() {
			body := errorBody(err)
			_ = out.event(StreamEvent{Type: "error", Error: &body})
		}
		return nil
	}
	_ = out.event(StreamEvent{Type: "end"})
	return nil
}
