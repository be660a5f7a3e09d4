package hookdtype

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// NameMatch is a parsed toolNameMatch expression:
//
//	"*" or ""   every name (blanks alone, too: the document's "留空")
//	"/regex/"   names the regular expression matches (unanchored; anchor it yourself)
//	"a|b|c"     any of the listed names
//	anything    exactly that name — "transfer*" is a name, not a glob
type NameMatch struct {
	any   bool
	re    *regexp.Regexp
	names []string
}

// ParseNameMatch parses a toolNameMatch expression; an invalid regex is an error.
func ParseNameMatch(expr string) (NameMatch, error) {
	switch {
	case strings.TrimSpace(expr) == "" || expr == "*":
		return NameMatch{any: true}, nil
	case len(expr) >= 2 && expr[0] == '/' && expr[len(expr)-1] == '/':
		re, err := regexp.Compile(expr[1 : len(expr)-1])
		if err != nil {
			return NameMatch{}, fmt.Errorf("invalid regular expression: %v", err)
		}
		return NameMatch{re: re}, nil
	default:
		// A pipe separates names; an exact name is the one-element case.
		names := strings.Split(expr, "|")
		for i, n := range names {
			names[i] = strings.TrimSpace(n)
		}
		return NameMatch{names: names}, nil
	}
}

// Match reports whether name is selected.
func (m NameMatch) Match(name string) bool {
	switch {
	case m.any:
		return true
	case m.re != nil:
		return m.re.MatchString(name)
	}
	for _, n := range m.names {
		if n == name {
			return true
		}
	}
	return false
}

// EmptyName reports whether m is a list that names an empty name ("a||b", "|"), which only an
// empty name matches.
func (m NameMatch) EmptyName() bool {
	return slices.Contains(m.names, "")
}

// Name is a name m selects that can be given by itself: the first listed one, or "" when m selects
// every name or by a regular expression.
func (m NameMatch) Name() string {
	for _, n := range m.names {
		if n != "" {
			return n
		}
	}
	return ""
}

// GlobLike are the names m matches exactly that look like globs (a *, ? or [ in them): the
// document has no globs, so "transfer*" selects only a tool of that very name, which is rarely
// what its writer meant.
func (m NameMatch) GlobLike() []string {
	var out []string
	for _, n := range m.names {
		if strings.ContainsAny(n, "*?[") {
			out = append(out, n)
		}
	}
	return out
}
