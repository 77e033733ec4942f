package egressgw

import (
	"bufio"
	"encoding/json"
	"io"
)

// The gateway's log is JSON lines, one per event; the engine side reads it for these.
const (
	// DeniedEvent is the line of each refusal: a Denial.
	DeniedEvent = "egress_denied"
	// SetEvent is the line the gateway logs once it applied a list SetEgress wrote, with the
	// generation written beside the list (the allow file's name + ".generation"), so that
	// SetEgress returns only once the list holds.
	SetEvent = "egress_set"
)

// ReadLog calls denied with each DeniedEvent of a gateway's log and set with the generation of
// each SetEvent (either may be nil), until the log ends or set returns true. Lines that are not
// events are skipped.
func ReadLog(r io.Reader, denied func(Denial), set func(generation string) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var ev struct {
			Event      string `json:"event"`
			Generation string `json:"generation"`
			Denial
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Event == DeniedEvent && denied != nil:
			denied(ev.Denial)
		case ev.Event == SetEvent && set != nil:
			if set(ev.Generation) {
				return nil
			}
		}
	}
	return sc.Err()
}
