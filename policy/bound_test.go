package policy

import (
	"regexp/syntax"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
)

// programBound is at least the size of the program RE2 compiles, repetitions expanded, and
// within a small factor of it: the price of a computed pattern is an honest one.
func TestProgramBound(t *testing.T) {
	exprs := []string{"", "a", "abc", "a*", "a+b?", "(a|bc|)", "[a-z]+", "a{1000}", "(a{3}b){2,5}", "(a){1,5}", "a{0}", "a{0,3}", "((?:x{2}){3}){4}",
		"a{2,}", "(^|\\s)/etc(/|\\s|$)", "[0-9]{17}[0-9Xx]", "\\bword\\b", "(?i)straße", "张三丰.*"}
	for _, g := range []string{"/etc/*", "/etc/**", "**/*.pem", "/a/**/key.pem", "?x?", strings.Repeat("*a", 50) + "*b"} {
		exprs = append(exprs, globRegexp(g))
	}
	for _, e := range exprs {
		re, err := syntax.Parse(e, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		size, err := types.RegexProgramSize(e)
		if err != nil {
			t.Fatal(err)
		}
		if b := programBound(re); b < uint64(size) || b > 4*uint64(size)+8 {
			t.Errorf("%q: bound %d, program %d", e, b, size)
		}
	}
}
