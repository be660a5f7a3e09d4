package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A scopeKey is a key of the session or user scope: sent with the global scope (the default when
// scope is left out), it is refused, not dropped to leave a rule for everyone.
func TestRulesScopeKeyOfGlobal(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newServer(t, db, []string{adminToken}, false)
		for _, body := range []string{
			`{"toolName":"shell_execute","behavior":"allow","scopeKey":"alice"}`,
			`{"toolName":"shell_execute","behavior":"allow","scope":"global","scopeKey":"alice"}`,
		} {
			if status, w := c.do("POST", "/api/rules", body); status != 400 || !strings.HasPrefix(w.Message, "scopeKey") {
				t.Errorf("%s: %d %s", body, status, w.Message)
			}
		}
		rules, err := db.RulesFor(t.Context(), 1, "bob", time.Now())
		if err != nil || len(rules) != 0 {
			t.Fatalf("bob's rules: %v %+v", err, rules)
		}
		status, w := c.do("POST", "/api/rules", `{"toolName":"shell_execute","behavior":"allow","scope":"global"}`)
		var rule storage.PermissionRule
		if status != 201 || json.Unmarshal(w.Data, &rule) != nil || rule.Scope != "global" || rule.ScopeKey != "" {
			t.Fatalf("global rule: %d %s", status, w.Data)
		}
	})
}

// A session rule's scopeKey is the session's id: one the runtime never looks a session up by
// ("abc", "007", "-3") is refused rather than kept as a rule that applies to nothing.
func TestRulesSessionScopeKey(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		c := newServer(t, db, []string{adminToken}, false)
		for _, key := range []string{"abc", "007", "-3", "0", "7 "} {
			body := `{"toolName":"shell_execute","behavior":"deny","scope":"session","scopeKey":"` + key + `"}`
			if status, w := c.do("POST", "/api/rules", body); status != 400 || !strings.HasPrefix(w.Message, "scopeKey") {
				t.Errorf("%s: %d %s", body, status, w.Message)
			}
		}
		if status, w := c.do("POST", "/api/rules", `{"toolName":"shell_execute","behavior":"deny","scope":"session","scopeKey":"7"}`); status != 201 {
			t.Fatalf("session 7: %d %s", status, w.Message)
		}
		rules, err := db.RulesFor(t.Context(), 7, "bob", time.Now())
		if err != nil || len(rules) != 1 || rules[0].Behavior != "deny" {
			t.Fatalf("session 7's rules: %v %+v", err, rules)
		}
	})
}

// A rule's toolName that lists an empty name ("shell_execute||x", "|") is refused as a hook's
// toolNameMatch is: no tool is named "", and the rule would govern nothing it meant to.
func TestRulesEmptyToolName(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	for _, name := range []string{"|", "shell_execute|", "shell_execute||web_search", "a| |b"} {
		body := `{"toolName":"` + name + `","behavior":"deny"}`
		if status, w := c.do("POST", "/api/rules", body); status != 400 || !strings.HasPrefix(w.Message, "toolName") {
			t.Errorf("%s: %d %s", body, status, w.Message)
		}
	}
	if status, w := c.do("POST", "/api/rules", `{"toolName":"shell_execute|web_search","behavior":"deny"}`); status != 201 {
		t.Fatalf("two names: %d %s", status, w.Message)
	}
}

// The list refuses a scopeKey filter no rule can match (a global rule has no key, a session
// rule's is a session id) rather than answer an empty page that reads as "no such rules".
func TestRulesListScopeKey(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	for _, q := range []string{"?scope=global&scopeKey=alice", "?scope=session&scopeKey=abc", "?scope=session&scopeKey=007"} {
		if status, w := c.do("GET", "/api/rules"+q, ""); status != 400 || !strings.HasPrefix(w.Message, "scopeKey") {
			t.Errorf("GET /api/rules%s: %d %s", q, status, w.Message)
		}
	}
	for _, q := range []string{"?scope=session&scopeKey=7", "?scope=user&scopeKey=alice", "?scopeKey=alice", "?scope=global"} {
		if status, w := c.do("GET", "/api/rules"+q, ""); status != 200 {
			t.Errorf("GET /api/rules%s: %d %s", q, status, w.Message)
		}
	}
}

// A rule's toolName or ruleContent that looks like a glob is kept as the syntax says (an exact
// name) and noted, as a hook's toolNameMatch is: a deny of "shell*" denies no shell tool.
func TestRulesGlobLikeNoted(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	status, w := c.do("POST", "/api/rules", `{"toolName":"shell*","ruleContent":"rm *","behavior":"deny"}`)
	if status != 201 || !strings.Contains(w.Message, `note: toolName: "shell*" is matched as that exact tool name, not as a glob`) ||
		!strings.Contains(w.Message, `note: ruleContent: "rm *" is matched as that exact subject, not as a glob`) {
		t.Fatalf("%d %s", status, w.Message)
	}
	if status, w := c.do("POST", "/api/rules", `{"toolName":"/^shell/i","behavior":"deny"}`); status != 201 ||
		!strings.Contains(w.Message, `note: toolName: "/^shell/i" is matched as that exact tool name: a /regex/ takes no flags after it`) {
		t.Fatalf("%d %s", status, w.Message)
	}
	if status, w := c.do("POST", "/api/rules", `{"toolName":"/^shell/","behavior":"deny"}`); status != 201 || w.Message != "success" {
		t.Fatalf("%d %s", status, w.Message)
	}
}

// A rule's toolName or ruleContent over 64 KiB is refused, as a hook's toolNameMatch is: every
// rule is compiled again at every tool call the runtime checks.
func TestRulesPatternSize(t *testing.T) {
	c := newServer(t, storagetest.SQLite(t), []string{adminToken}, false)
	long := "/" + strings.Repeat("(a|b)", 14000) + "/"
	for _, body := range []string{
		`{"toolName":"` + long + `","behavior":"deny"}`,
		`{"toolName":"shell_execute","ruleContent":"` + long + `","behavior":"deny"}`,
	} {
		if status, w := c.do("POST", "/api/rules", body); status != 400 || !strings.Contains(w.Message, "bytes long; at most 65536") {
			t.Errorf("%d %.80s", status, w.Message)
		}
	}
}
