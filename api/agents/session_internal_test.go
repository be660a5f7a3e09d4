package agents

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"
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

// A session's number is the first 53 bits of the SHA-256 of its harness, principal and id, each
// followed by a NUL but the last: the numbers recorded before must stay the same, for short and
// long ids alike.
func TestSessionIDIsTheHashOfItsParts(t *testing.T) {
	p := int64(1001)
	for _, principal := range []*int64{nil, &p} {
		for _, external := range []string{"", "8f3c2a1e-5b7d-4c9e-a1f2-3d4e5f6a7b8c", "user alice\x00s", strings.Repeat("x", 300)} {
			h := sha256.New()
			h.Write([]byte(Cursor + "\x00"))
			if principal != nil {
				h.Write([]byte(strconv.FormatInt(*principal, 10)))
			}
			h.Write([]byte("\x00" + external))
			want := max(int64(binary.BigEndian.Uint64(h.Sum(nil))>>11), 1)
			if got := SessionID(Cursor, principal, external); got != want {
				t.Errorf("%v %q: %d, want %d", principal, external, got, want)
			}
		}
	}
}
