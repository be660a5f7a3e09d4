package aisdk_test

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
		return e.do(chat("c-points", []any{user("m1", "write my tasks")}), []string{"Authorization", "Bearer key-carol"})
	})
}

// A pre_tool_use policy that modifies the arguments: the tool-input-delta parts are the model's
// own, tool-input-available has the arguments the tool runs with.
func TestToolInputAvailableCarriesHookModifiedArguments(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{})
	e.AE.Hook(t, `{"hookName":"write-mod","hookType":"pre_tool_use","priority":-1,"toolNameMatch":"workspace_write_file",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"m","when":"true","decision":"modify",
		"modifiedValue":"args.with({'content': 'MODIFIED'})"}]}}`)
	r := e.stream(chat("c-mod", []any{user("m1", "write my tasks")}))
	var deltas strings.Builder
	for _, p := range r.Events {
		if p["type"] == "tool-input-delta" {
			deltas.WriteString(p["inputTextDelta"].(string))
		}
	}
	if got := deltas.String(); !strings.Contains(got, "- [ ] a") {
		t.Fatalf("tool-input-delta %q, want the model's own arguments", got)
	}
	in, _ := first(t, r.Events, "tool-input-available")["input"].(map[string]any)
	if in["content"] != "MODIFIED" || in["path"] != "tasks.md" {
		t.Fatalf("tool-input-available input %v, want the hook's arguments", in)
	}
	first(t, r.Events, "tool-output-available") // the call ran
}
