package agui_test

import (
	"strings"
	"testing"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/test/dialecttest"
)

// Every hook point of a chat turn fires for this dialect as for the others, with the API key's
// principal on the envelope.
func TestEveryHookPointFires(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{}, wire.APIKey{Key: "key-carol", UserID: "carol", PrincipalID: 7})
	dialecttest.EveryHookPoint(t, e.Env, func() dialecttest.Response {
		return e.do(input("t-points", "run-1", []any{user("m1", "write my tasks")}), []string{"Authorization", "Bearer key-carol"})
	})
}

// A client-side call runs in the client with the arguments its TOOL_CALL_ARGS carry, so they are
// the ones the pre_tool_use hooks let through: a modify's, not the model's (the client ran the
// model's, a masked value unmasked).
func TestClientCallCarriesTheHooksArguments(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{})
	e.Hook(`{"decision":"modify","modifiedValue":"{\"options\":[\"C\"]}"}`)
	tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option", "parameters": map[string]any{"type": "object"}}}
	r := e.stream(input("t-client-mod", "run-1", []any{user("m1", "pick one")}, "tools", tools))
	out := last(r.Events)["outcome"].(map[string]any)
	pending, _ := out["pendingToolCallIds"].([]any)
	if len(pending) != 1 {
		t.Fatalf("pause: %v", types(r.Events))
	}
	var args strings.Builder
	var started, ended bool
	for _, ev := range r.Events {
		if ev["toolCallId"] != pending[0] {
			continue
		}
		switch ev["type"] {
		case "TOOL_CALL_START":
			started = ev["toolCallName"] == "client_pick"
		case "TOOL_CALL_ARGS":
			args.WriteString(ev["delta"].(string))
		case "TOOL_CALL_END":
			ended = started
		}
	}
	if !ended || args.String() != `{"options":["C"]}` {
		t.Fatalf("the client is told to run client_pick with %q (started %v, ended %v): %v", args.String(), started, ended, types(r.Events))
	}
}

// A client-side call the hooks refuse is shown whole with its result, so the client does not run it.
func TestRefusedClientCallComesWithItsResult(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{})
	e.Hook(`{"decision":"deny","reason":"not that one"}`)
	tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option", "parameters": map[string]any{"type": "object"}}}
	r := e.stream(input("t-client-deny", "run-1", []any{user("m1", "pick one")}, "tools", tools))
	var seq []string
	for _, ev := range r.Events {
		if ev["toolCallId"] != nil && ev["type"] != "CUSTOM" {
			seq = append(seq, ev["type"].(string))
		}
	}
	if got := strings.Join(seq, " "); got != "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT" {
		t.Fatalf("the refused call: %s (%v)", got, types(r.Events))
	}
	if res := first(t, r.Events, "TOOL_CALL_RESULT"); !strings.HasPrefix(res["content"].(string), "denied: not that one") {
		t.Fatalf("result %v", res)
	}
}
