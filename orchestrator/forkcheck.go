package orchestrator

import (
	"errors"

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
	return backend.Check{Name: "fork", Status: backend.Pass, Detail: o.backend.Kind() + " backend: fork, snapshot and reset supported (files and volumes; processes start afresh)"}
}
