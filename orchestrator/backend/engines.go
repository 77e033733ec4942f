package backend

import (
	"context"
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/composebox/composebox/internal/errdefs"
)

// DefaultEngine names the one engine of a single-engine backend.
const DefaultEngine = "default"

// Placer is a backend of several engines. A whole sample lives on one of them: the
// orchestrator asks where before it calls Up, and every later call about the project (Up,
// Wait, exec, files, markers, Down) goes to that engine.
type Placer interface {
	// Place chooses the engine of req's sample. An engine that is down or full is skipped;
	// when none can take the sample, the error is a *PlacementError saying why for each.
	Place(ctx context.Context, req PlaceRequest) (Placement, error)
}

// PlaceRequest describes the sample to place.
type PlaceRequest struct {
	// Project is the sample's normalised project: its name, and the images its services run
	// (which the engine chosen gets before Up, and which weigh in its choice).
	Project *types.Project
	// Task names the sample's task.
	Task string
	// Labels, when set, restrict the sample to engines carrying every one of them.
	Labels map[string]string
	// From, when set, is the project whose recorded state (a fork's cut, a snapshot) the
	// sample starts from: the state lives on that project's engine, so the sample goes there.
	From string
}

// Placement is where a sample goes, and why.
type Placement struct {
	Engine   string
	Endpoint string
	// Reason says why this engine, in a few words: its load, and whether it already had the
	// sample's images.
	Reason string
}

// EngineLister is a backend that can say which engines it spans.
type EngineLister interface {
	// Engines describes each engine as last seen, in configuration order.
	Engines() []EngineStatus
}

// EngineStatus is one engine of a backend of several.
type EngineStatus struct {
	Name     string            `json:"name"`
	Endpoint string            `json:"endpoint"`
	Labels   map[string]string `json:"labels,omitempty"`
	// MaxSamples is the engine's capacity; 0 is unbounded.
	MaxSamples int `json:"max_samples,omitempty"`
	// Live counts the samples placed there, as last counted.
	Live int `json:"live"`
	// Down says the engine did not answer when last asked; Err says how.
	Down bool   `json:"down,omitempty"`
	Err  string `json:"error,omitempty"`
}

// PlacementError is a sample that no engine could take. It matches ErrUnavailable, and says
// why for each engine.
type PlacementError struct {
	Project  string
	Refusals []Refusal
}

// Refusal is why one engine did not take a sample.
type Refusal struct {
	Engine string
	Reason string
}

func (e *PlacementError) Error() string {
	parts := make([]string, len(e.Refusals))
	for i, r := range e.Refusals {
		parts[i] = r.Engine + ": " + r.Reason
	}
	return fmt.Sprintf("place sample %s: no engine can take it (%s)", e.Project, strings.Join(parts, "; "))
}

// Is makes a PlacementError an ErrUnavailable: the engines may take samples again later.
func (e *PlacementError) Is(target error) bool { return target == errdefs.ErrUnavailable }

// EngineError is an error of one engine of several: its message names the engine, and it
// unwraps to the engine's own error (whose category it keeps).
type EngineError struct {
	Engine string
	Err    error
}

func (e *EngineError) Error() string { return "engine " + e.Engine + ": " + e.Err.Error() }
func (e *EngineError) Unwrap() error { return e.Err }
