// Package placement chooses the engine a sample goes to, among several: the least loaded of
// those that can take it, ties going to one that already has the sample's images. It is pure
// logic over a snapshot of the engines (no I/O, no clock), so that a backend of several engines
// decides in microseconds and the rule is tested on its own.
package placement

import (
	"fmt"
	"strings"
)

// Engine is one engine as the chooser sees it.
type Engine struct {
	Name string
	// Live counts the samples the engine holds, those being placed included.
	Live int
	// Max is the engine's capacity in samples; 0 is unbounded.
	Max int
	// CPUs weighs an unbounded engine: its load is Live / CPUs (0 counts as 1).
	CPUs int
	// Down says the engine did not answer; Why says how.
	Down bool
	Why  string
	// Missing counts the sample's images the engine lacks: it would have to build or receive
	// them first.
	Missing int
	// Unfit, when set, says why the engine may not take this sample at all (its labels do not
	// match what the sample asks for).
	Unfit string
}

// capacity is what the engine's load is measured against.
func (e Engine) capacity() int {
	switch {
	case e.Max > 0:
		return e.Max
	case e.CPUs > 0:
		return e.CPUs
	}
	return 1
}

// Load is the share of its capacity the engine would use with one more sample.
func (e Engine) Load() float64 { return float64(e.Live+1) / float64(e.capacity()) }

// Full reports an engine at its capacity.
func (e Engine) Full() bool { return e.Max > 0 && e.Live >= e.Max }

// Refusal is why an engine cannot take the sample.
type Refusal struct {
	Engine string
	Reason string
}

// Decision is the engine chosen, by its index in the slice given, and why.
type Decision struct {
	Index  int
	Reason string
}

// epsilon is how close two loads are to count as a tie.
const epsilon = 1e-9

// Choose picks the engine for one sample: among those up and not full, the one whose load
// would be lowest with the sample (live samples over capacity); between loads that tie, the one
// missing the fewest of the sample's images, then the one with fewer samples, then the first
// given. With no engine able to take it, ok is false and refusals say why for each.
func Choose(engines []Engine) (d Decision, refusals []Refusal, ok bool) {
	best := -1
	tied := 0       // engines tied on load with best, best itself excluded
	candidates := 0 // engines that could take it
	for i, e := range engines {
		switch {
		case e.Unfit != "":
			refusals = append(refusals, Refusal{Engine: e.Name, Reason: e.Unfit})
			continue
		case e.Down:
			refusals = append(refusals, Refusal{Engine: e.Name, Reason: "down: " + orUnknown(e.Why)})
			continue
		case e.Full():
			refusals = append(refusals, Refusal{Engine: e.Name, Reason: fmt.Sprintf("full (%d of %d samples)", e.Live, e.Max)})
			continue
		}
		candidates++
		if best < 0 {
			best = i
			continue
		}
		b := engines[best]
		switch dl := e.Load() - b.Load(); {
		case dl < -epsilon:
			best, tied = i, 0
		case dl > epsilon:
		default:
			tied++
			if e.Missing < b.Missing || (e.Missing == b.Missing && e.Live < b.Live) {
				best = i
			}
		}
	}
	if best < 0 {
		return Decision{Index: -1}, refusals, false
	}
	return Decision{Index: best, Reason: reason(engines[best], tied, candidates)}, nil, true
}

// reason says why e was chosen, in a few words.
func reason(e Engine, tied, n int) string {
	var b strings.Builder
	switch {
	case n == 1:
		b.WriteString("the only engine that can take it")
	case tied > 0:
		fmt.Fprintf(&b, "least loaded, tied with %d other", tied)
		if tied > 1 {
			b.WriteString("s")
		}
	default:
		b.WriteString("least loaded")
	}
	if e.Max > 0 {
		fmt.Fprintf(&b, " (%d of %d samples)", e.Live, e.Max)
	} else {
		fmt.Fprintf(&b, " (%d samples on %d CPUs)", e.Live, max(e.CPUs, 1))
	}
	switch {
	case e.Missing == 0:
		b.WriteString("; has the sample's images")
	case e.Missing == 1:
		b.WriteString("; lacks 1 image")
	default:
		fmt.Fprintf(&b, "; lacks %d images", e.Missing)
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "no answer"
	}
	return s
}
