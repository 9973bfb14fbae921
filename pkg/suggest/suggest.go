// Package suggest finds the "did you mean" of a mistyped name: the one rule
// of the descriptor's, the server configuration's and the plugins'
// settings' errors, and of the CLI's command groups.
//
// It imports only the standard library.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate closest to s when it is close enough to be
// a likely typo, or "".
func Closest(s string, candidates []string) string {
	// A name longer than editDistance reads is no typo of any candidate;
	// said first, a hostile 1 MiB name costs nothing more.
	if len(s) > maxRunes*utf8.UTFMax {
		return ""
	}
	// Allow about one edit per three characters, at most three.
	best, bestDist := "", min(len(s)/3+1, 3)
	s = strings.ToLower(s)
	for _, c := range candidates {
		if d := editDistance(s, strings.ToLower(c)); d <= bestDist && (best == "" || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (short strings only:
// callers pass names of fields, keys and steps).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > maxRunes || len(rb) > maxRunes {
		if a == b {
			return 0
		}
		return maxRunes
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// maxRunes is the longest string editDistance compares: past it, two
// strings are equal or far apart.
const maxRunes = 64
