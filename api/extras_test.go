package api_test

import (
	"encoding/json"
	"testing"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage/storagetest"
)

// An agent outside hookd gets the hooks' extras with the decision, to show them itself.
func TestDispatchReturnsExtras(t *testing.T) {
	c, _ := newDispatchServer(t, storagetest.SQLite(t))
	rcv := newReceiver(t, `{"decision":"deny","reason":"login first","hint":"ask for access",
		"toolEvent":{"category":"auth_required","payload":{"authUrl":"https://example.com/oauth"}}}`)
	plain := newReceiver(t, `{"decision":"allow"}`)
	for _, h := range []string{
		`{"hookName": "plain", "hookType": "pre_tool_use", "priority": 1, "dispatchConfig": {"url": "` + plain.URL + `"}}`,
		`{"hookName": "db-auth", "hookType": "pre_tool_use", "priority": 2, "dispatchConfig": {"url": "` + rcv.URL + `"}}`,
	} {
		if status, w := c.do("POST", "/api/hooks", h); status != 201 {
			t.Fatal(w.Message)
		}
	}
	status, w := c.do("POST", "/api/hooks/dispatch", `{"hookType": "pre_tool_use", "context": {"toolName": "connectDatabase", "toolCallId": "c1", "arguments": {}}}`)
	if status != 200 {
		t.Fatal(w.Message)
	}
	var dec dispatcher.Decision
	if err := json.Unmarshal(w.Data, &dec); err != nil {
		t.Fatal(err)
	}
	if dec.Decision != "deny" || len(dec.Extras) != 1 {
		t.Fatalf("%s", w.Data)
	}
	x := dec.Extras[0]
	if x.HookName != "db-auth" || x.Hint != "ask for access" || x.ToolEvent == nil || x.ToolEvent.Category != "auth_required" ||
		string(x.ToolEvent.Payload) != `{"authUrl":"https://example.com/oauth"}` {
		t.Fatalf("%+v", x)
	}
}
