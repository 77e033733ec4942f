package orchestrator

import (
	"errors"
	"fmt"

	"github.com/composebox/composebox/orchestrator/backend"
)

// forkCheck is doctor's line saying whether the backend can fork, snapshot and reset samples.
func (o *Orchestrator) forkCheck() backend.Check {
	if _, err := o.forker("fork"); err != nil {
		var ue *backend.UnsupportedError
		detail := err.Error()
		if errors.As(err, &ue) {
			detail = ue.Backend + " backend: " + ue.Reason
		}
		return backend.Check{Name: "fork", Status: backend.Warn, Detail: "fork, snapshot and reset are not supported: " + detail}
	}
	what := o.backend.Kind() + " backend"
	if el, ok := o.backend.(backend.EngineLister); ok && len(el.Engines()) > 1 {
		// Each verb runs on the engine that holds the sample, where its forks go too.
		what = fmt.Sprintf("%s backend over %d engines", o.backend.Kind(), len(el.Engines()))
		return backend.Check{Name: "fork", Status: backend.Pass, Detail: what + ": fork, snapshot and reset supported on every engine, each on the engine that holds the sample, where its forks start too (files and volumes; processes start afresh)"}
	}
	return backend.Check{Name: "fork", Status: backend.Pass, Detail: what + ": fork, snapshot and reset supported (files and volumes; processes start afresh)"}
}
