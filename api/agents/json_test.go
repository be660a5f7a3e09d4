package agents

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// strangeTexts are strings json.Marshal escapes in every way it has.
var strangeTexts = []string{"", "", "deny", "hookd: denied", `<script>&"\`, "\u2028\u2029\x00\x1f\t\n\r\b\f", "\xff\xfe",
	"大额转账需人工审批", "a\u007fb", `{"amount":1}`, "\U0001F600 \xed\xa0\x80", " "}

// rawObjects are tool arguments a rewrite may carry: json.Marshal compacts them and escapes HTML.
var rawObjects = []string{"", `{}`, `{"command":"make test"}`, "{ \"a\" : [1, 2,\n {\"b\":\"<&>\"}] }", `{"s":"\u2028"}`}

// TestHandWrittenJSONIsMarshals: the answers and arguments written by hand are json.Marshal's,
// byte for byte, on every mix of strange texts.
func TestHandWrittenJSONIsMarshals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	text := func() string { return strangeTexts[rng.IntN(len(strangeTexts))] }
	for range 5000 {
		checkHandWritten(t, text(), text(), text(), text(), text(), rawObjects[rng.IntN(len(rawObjects))], rng.IntN(3) > 0)
	}
}

// FuzzHandWrittenJSON: TestHandWrittenJSONIsMarshals on any texts.
func FuzzHandWrittenJSON(f *testing.F) {
	f.Add("deny", "no", "PreToolUse", "<&>", "\u2028", `{"a":1}`, true)
	f.Fuzz(func(t *testing.T, a, b, c, d, e, raw string, specific bool) {
		if modifiedObject(Verdict{Modified: &raw}) == nil {
			raw = "" // only a rewrite that is an object is answered
		}
		checkHandWritten(t, a, b, c, d, e, raw, specific)
	})
}

func checkHandWritten(t *testing.T, a, b, c, d, e, raw string, specific bool) {
	t.Helper()
	same := func(what string, got []byte, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s %+v:\n got %s\nwant %s (%v)", what, v, got, want, err)
		}
	}
	answer := claudeAnswer{Decision: a, Reason: b, SystemMessage: c}
	if specific {
		answer.HookSpecificOutput = &claudeSpecific{HookEventName: d, PermissionDecision: e, PermissionDecisionReason: a,
			AdditionalContext: b}
		if raw != "" {
			answer.HookSpecificOutput.UpdatedInput = json.RawMessage(raw)
		}
	}
	same("claudeAnswer", answer.marshal(), answer)
	p := cursorPermission{Permission: a, UserMessage: b, AgentMessage: c}
	same("cursorPermission", p.marshal(), p)
	same("stringObject", stringObject("command", a, "cwd", b), map[string]string{"command": a, "cwd": b})
	same("stringObject", stringObject("file_path", c), map[string]string{"file_path": c})
}
