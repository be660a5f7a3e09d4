package main

import (
	"net/http"
	"testing"
)

// voloTypes are the EventTypes of volo-chat-api.md, "EventType 枚举" (the protocol, tool, UI,
// command and subagent families), in the document's order.
var voloTypes = []string{
	"PROGRESS", "ASSISTANT_DELTA", "ASSISTANT_END", "ERROR", "COMPLETE",
	"TOOL_START", "TOOL_DELTA", "TOOL_END",
	"RENDER_UI", "INTERACTION", "WEB_SEARCH", "WEB_FETCH",
	"COMMAND_START", "COMMAND_RESULT", "COMMAND_END",
	"SUBAGENT_DISPATCH", "SUBAGENT_NOTIFY", "SUBAGENT_COMPLETE",
}

// TestVoloEveryEventType: every EventType of the document comes out of the running daemon in a
// real scenario.
func TestVoloEveryEventType(t *testing.T) { eachDatabase(t, testVoloEveryEventType) }

func testVoloEveryEventType(t *testing.T, database string) {
	d := startDialectDaemon(t, database, "")
	seen := newTypeSet(func(ev sse) string {
		if ev.Event != str(ev.Data["type"]) {
			t.Errorf("event: %s carries type %v", ev.Event, ev.Data["type"])
		}
		return ev.Event
	})
	post := func(scenario, path string, body map[string]any) []sse {
		t.Helper()
		code, evs := d.stream("POST", "/api/agent/chat/volo-ai"+path, mustJSON(body), nil)
		if code != http.StatusOK {
			t.Fatalf("%s: status %d", scenario, code)
		}
		seen.add(scenario, evs)
		return evs
	}
	intent := func(scenario, session, message string) []sse {
		t.Helper()
		return post(scenario, "/"+session+"/intent", map[string]any{"userMessage": message, "executionMode": "MAX"})
	}
	find := func(evs []sse, typ string) map[string]any {
		t.Helper()
		for _, ev := range evs {
			if ev.Event == typ {
				return ev.Data
			}
		}
		t.Fatalf("no %s", typ)
		return nil
	}

	evs := intent("tool_attachment", "8a0e5f3c-0001-4b8e-9a51-6f1d2c3b4a50", "tasks")
	if end := find(evs, "ASSISTANT_END"); end["content"] != "已完成，任务清单已保存至 /workspace/tasks.md" {
		t.Fatalf("assistant end %v", end)
	}
	find(evs, "RENDER_UI")
	// send_attachment: the sent file is a RENDER_UI of its own (after the one for its creation),
	// and one more as part of the answer.
	renders := 0
	for _, ev := range intent("attachment_sent", "8a0e5f3c-0007-4b8e-9a51-6f1d2c3b4a50", "send report") {
		if ui, _ := ev.Data["ui"].(map[string]any); ev.Event == "RENDER_UI" && ui["name"] == "report.md" {
			renders++
		}
	}
	if renders != 3 {
		t.Fatalf("%d RENDER_UI frames for report.md", renders)
	}
	// A confirmation: the turn pauses on an INTERACTION; resume approves and streams on.
	evs = intent("interaction", "8a0e5f3c-0002-4b8e-9a51-6f1d2c3b4a50", "ask me")
	turn := find(evs, "INTERACTION")["traceInfo"].(map[string]any)["turnId"]
	post("interaction", "/resume?turnId="+str(turn), map[string]any{"turnId": turn, "response": "同意"})
	// An allowed fetch (WEB_FETCH), then a denied one.
	find(intent("web_fetch", "8a0e5f3c-0003-4b8e-9a51-6f1d2c3b4a50", "fetch it"), "WEB_FETCH")
	// A web search against the SearXNG-style backend: TOOL_END, then WEB_SEARCH with the hits.
	search := find(intent("web_search", "8a0e5f3c-0007-4b8e-9a51-6f1d2c3b4a50", "search it"), "WEB_SEARCH")["search"].(map[string]any)
	if hits := search["results"].([]any); search["query"] != "季度报告" || search["success"] != true || len(hits) != 2 ||
		hits[1].(map[string]any)["title"] != "年度报告" || hits[1].(map[string]any)["snippet"] != "收入 400" {
		t.Fatalf("web search %v", search)
	}
	intent("subagent", "8a0e5f3c-0004-4b8e-9a51-6f1d2c3b4a50", "delegate")
	intent("command", "8a0e5f3c-0005-4b8e-9a51-6f1d2c3b4a50", "/tools")
	if e := find(intent("error", "8a0e5f3c-0006-4b8e-9a51-6f1d2c3b4a50", "fatal"), "ERROR"); e["message"] == "" {
		t.Fatalf("error %v", e)
	}

	seen.check(t, "volo", voloTypes, nil)
}
