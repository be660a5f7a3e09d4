package hookdtype

import (
	"strings"
	"unicode/utf8"
)

// Suggest returns the candidate closest to s when it is close enough to be a likely typo, else "".
// Case and the separators '_' and '-' are ignored first, so `failure_mode` finds `failureMode`.
func Suggest(s string, candidates []string) string {
	fs := foldName(s)
	best, bestD := "", min(len(s)/3+1, 3)
	for _, c := range candidates {
		fc := foldName(c)
		if fc == fs {
			return c
		}
		// The distance is at least the difference of the lengths: a name far longer than every
		// candidate (a megabyte of key) is not compared rune by rune.
		if diff := utf8.RuneCountInString(fs) - utf8.RuneCountInString(fc); diff > bestD || -diff > bestD {
			continue
		}
		if d := distance(fs, fc); d <= bestD && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b, in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
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

// foldName is a field name without case and the separators '_' and '-'.
func foldName(v string) string { return separators.Replace(strings.ToLower(v)) }

var separators = strings.NewReplacer("_", "", "-", "")
