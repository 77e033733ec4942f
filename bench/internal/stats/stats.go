// Package stats holds the figures the benchmarks report, computed the same way in each.
package stats

import "slices"

// Percentile is the nearest-rank p-th percentile of xs (0 < p ≤ 100), zero for no values. It
// does not reorder xs.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
