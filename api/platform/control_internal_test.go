package platform

import (
	"testing"

	"github.com/hookd/hookd/hookdtype"
)

// A remembered rule matches its subject and nothing else, whatever the subject looks like to the
// toolNameMatch syntax.
func TestExactlyMatchesOnlyItsSubject(t *testing.T) {
	for _, s := range []string{"a.txt", "", "*", "a|b", "/x/", " padded ", "/workspace/a.txt", "ls -la | grep x", "/", "a.b+c(d)"} {
		m, err := hookdtype.ParseNameMatch(exactly(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if !m.Match(s) {
			t.Fatalf("%q does not match itself as %q", s, exactly(s))
		}
		for _, other := range []string{s + "x", "x" + s, "a", "b", "", "anything"} {
			if other != s && m.Match(other) {
				t.Fatalf("the rule for %q (%q) matches %q", s, exactly(s), other)
			}
		}
	}
	if exactly("a.txt") != "a.txt" {
		t.Fatalf("a plain subject is kept as it is: %q", exactly("a.txt"))
	}
}
