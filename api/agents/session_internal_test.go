package agents

import (
	"testing"

	"github.com/hookd/hookd/api/wire"
)

// In development mode callers have no principal: the user each names keeps its sessions apart
// (two users' "same" were one hookd session). With a principal the number is SessionID's.
func TestSessionOfDevelopmentUsers(t *testing.T) {
	alice, bob := wire.Caller{UserID: "alice"}, wire.Caller{UserID: "bob"}
	if sessionOf(ClaudeCode, alice, "same") == sessionOf(ClaudeCode, bob, "same") {
		t.Fatal("two users' sessions of one id are one session")
	}
	if sessionOf(ClaudeCode, alice, "same") != sessionOf(ClaudeCode, alice, "same") {
		t.Fatal("one user's session is not stable")
	}
	p := int64(7)
	if sessionOf(ClaudeCode, wire.Caller{UserID: "alice", PrincipalID: &p}, "same") != SessionID(ClaudeCode, &p, "same") {
		t.Fatal("a principal's session is not SessionID's")
	}
}
