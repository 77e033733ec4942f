package placement

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	tests := []struct {
		name    string
		engines []Engine
		want    string // engine chosen, "" for none
		reason  string // a part of the reason
	}{
		{"one engine", []Engine{{Name: "a", Max: 4}}, "a", "the only engine that can take it (0 of 4 samples)"},
		{"least loaded by share, not by count", []Engine{{Name: "a", Live: 2, Max: 4}, {Name: "b", Live: 3, Max: 16}}, "b", "least loaded (3 of 16"},
		{"the one with room", []Engine{{Name: "a", Live: 4, Max: 4}, {Name: "b", Live: 9, Max: 10}}, "b", "the only engine that can take it (9 of 10"},
		{"down is skipped", []Engine{{Name: "a", Down: true}, {Name: "b", Live: 5, Max: 6}}, "b", ""},
		{"tie goes to the images", []Engine{{Name: "a", Live: 1, Max: 4, Missing: 2}, {Name: "b", Live: 1, Max: 4}}, "b", "tied with 1 other (1 of 4 samples); has the sample's images"},
		{"tie on images too goes to fewer samples", []Engine{{Name: "a", Live: 3, Max: 8}, {Name: "b", Live: 1, Max: 4}}, "b", "tied with 1 other (1 of 4"},
		// (2+1)/8 < (1+1)/4: not a tie.
		{"load first, images second", []Engine{{Name: "a", Live: 0, Max: 2, Missing: 0}, {Name: "b", Live: 0, Max: 8, Missing: 3}}, "b", "lacks 3 images"},
		{"first given wins a full tie", []Engine{{Name: "a", Max: 4}, {Name: "b", Max: 4}}, "a", "tied with 1 other"},
		{"unbounded by CPUs", []Engine{{Name: "a", Live: 3, CPUs: 2}, {Name: "b", Live: 6, CPUs: 8}}, "b", "(6 samples on 8 CPUs)"},
		{"unfit is skipped", []Engine{{Name: "a", Max: 8, Unfit: "labels"}, {Name: "b", Live: 3, Max: 4}}, "b", "the only engine"},
		{"none", []Engine{{Name: "a", Down: true, Why: "connection refused"}, {Name: "b", Live: 2, Max: 2}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, refusals, ok := Choose(tt.engines)
			if tt.want == "" {
				if ok {
					t.Fatalf("chose %s, want none", tt.engines[d.Index].Name)
				}
				if len(refusals) != len(tt.engines) {
					t.Fatalf("refusals %v: want one per engine", refusals)
				}
				return
			}
			if !ok {
				t.Fatalf("chose none (%v), want %s", refusals, tt.want)
			}
			if got := tt.engines[d.Index].Name; got != tt.want {
				t.Fatalf("chose %s (%s), want %s", got, d.Reason, tt.want)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason %q lacks %q", d.Reason, tt.reason)
			}
		})
	}
}

func TestChooseRefusalsSayWhy(t *testing.T) {
	_, refusals, ok := Choose([]Engine{{Name: "a", Down: true, Why: "connection refused"}, {Name: "b", Live: 2, Max: 2}, {Name: "c", Down: true}})
	if ok {
		t.Fatal("chose an engine, want none")
	}
	want := []Refusal{{"a", "down: connection refused"}, {"b", "full (2 of 2 samples)"}, {"c", "down: no answer"}}
	if fmt.Sprint(refusals) != fmt.Sprint(want) {
		t.Fatalf("refusals %v, want %v", refusals, want)
	}
}

// TestChooseSpreadsByCapacity places samples one by one and checks the live counts stay in
// proportion to the capacities.
func TestChooseSpreadsByCapacity(t *testing.T) {
	engines := []Engine{{Name: "a", Max: 10}, {Name: "b", Max: 20}, {Name: "c", Max: 30}}
	for range 30 {
		d, _, ok := Choose(engines)
		if !ok {
			t.Fatal("no engine")
		}
		engines[d.Index].Live++
	}
	for _, e := range engines {
		if e.Live != e.Max/2 {
			t.Errorf("%s holds %d of %d after 30 samples, want %d", e.Name, e.Live, e.Max, e.Max/2)
		}
	}
	for range 30 {
		d, _, ok := Choose(engines)
		if !ok {
			t.Fatal("no engine before all are full")
		}
		engines[d.Index].Live++
	}
	if _, _, ok := Choose(engines); ok {
		t.Fatal("an engine was chosen with every engine full")
	}
}

// BenchmarkChoose is one decision over 50 engines of mixed capacity, some missing the images.
func BenchmarkChoose(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	engines := make([]Engine, 50)
	for i := range engines {
		engines[i] = Engine{Name: fmt.Sprintf("e%d", i), Max: 100 + r.IntN(300), Missing: r.IntN(3)}
	}
	for b.Loop() {
		d, _, ok := Choose(engines)
		if !ok {
			for i := range engines {
				engines[i].Live = 0
			}
			continue
		}
		engines[d.Index].Live++
	}
}
