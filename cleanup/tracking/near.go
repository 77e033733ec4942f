package tracking

import (
	"cmp"
	"slices"
	"strings"
)

// NearNames returns the candidates that look like a misspelling of name (a small edit
// distance, or one containing the other), closest first, at most three. A user who typed a
// project or task name that does not exist is told what they may have meant.
func NearNames(name string, candidates []string) []string {
	type scored struct {
		name string
		d    int
	}
	var near []scored
	for _, c := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		if c == name || c == "" {
			continue
		}
		d := editDistance(name, c)
		if d <= max(2, len(name)/3) || (len(name) >= 3 && (strings.Contains(c, name) || strings.Contains(name, c))) {
			near = append(near, scored{c, d})
		}
	}
	slices.SortStableFunc(near, func(a, b scored) int { return cmp.Compare(a.d, b.d) })
	out := make([]string, 0, 3)
	for _, s := range near[:min(3, len(near))] {
		out = append(out, s.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// DidYouMean is the hint to append to a not-found message: " (did you mean x or y?)", or ""
// when nothing is near.
func DidYouMean(name string, candidates []string) string {
	near := NearNames(name, candidates)
	if len(near) == 0 {
		return ""
	}
	return " (did you mean " + strings.Join(near, " or ") + "?)"
}
