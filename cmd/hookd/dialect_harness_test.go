package main

import (
	"net/http"
	"strings"
	"testing"
)

// harnessTypes are the AgentEvent types of harness-chat-api.md §5 (§5.1 AGENT_START … §5.31
// CUSTOM), in the document's order.
var harnessTypes = []string{
	"AGENT_START", "THINKING_BLOCK_START", "THINKING_BLOCK_DELTA", "THINKING_BLOCK_END",
	"MODEL_CALL_START", "MODEL_CALL_END", "TOOL_CALL_START", "TOOL_CALL_DELTA", "TOOL_CALL_END",
	"TOOL_RESULT_START", "TOOL_RESULT_TEXT_DELTA", "TOOL_RESULT_DATA_DELTA", "TOOL_RESULT_END",
	"DATA_BLOCK_START", "DATA_BLOCK_DELTA", "DATA_BLOCK_END", "TEXT_BLOCK_START", "TEXT_BLOCK_DELTA",
	"TEXT_BLOCK_END", "AGENT_RESULT", "AGENT_END", "EXCEED_MAX_ITERS", "REQUIRE_USER_CONFIRM",
	"USER_CONFIRM_RESULT", "ALL_TOOLS_DENIED", "REQUIRE_EXTERNAL_EXECUTION", "EXTERNAL_EXECUTION_RESULT",
	"REQUEST_STOP", "SUBAGENT_EXPOSED", "HINT_BLOCK", "CUSTOM",
}

// TestHarnessEveryEventType: every §5 type comes out of the running daemon in a real scenario.
func TestHarnessEveryEventType(t *testing.T) { eachDatabase(t, testHarnessEveryEventType) }

func testHarnessEveryEventType(t *testing.T, database string) {
	d := startDialectDaemon(t, database, "")
	seen := newTypeSet(func(ev sse) string { return str(ev.Data["type"]) })
	chat := func(scenario string, body map[string]any, on func(sse, http.Header) bool) []sse {
		t.Helper()
		body["userId"] = "tester"
		code, evs := d.stream("POST", "/harness/chat", mustJSON(body), on)
		if code != http.StatusOK {
			t.Fatalf("%s: status %d", scenario, code)
		}
		seen.add(scenario, evs)
		return evs
	}
	typesOf := func(evs []sse) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, str(ev.Data["type"]))
		}
		return out
	}
	find := func(evs []sse, typ string) map[string]any {
		t.Helper()
		for _, ev := range evs {
			if ev.Data["type"] == typ {
				return ev.Data
			}
		}
		t.Fatalf("no %s in %v", typ, typesOf(evs))
		return nil
	}
	// §6: a response opens with AGENT_START and ends AGENT_RESULT → AGENT_END, paused or not.
	shaped := func(scenario string, evs []sse, reason string) {
		t.Helper()
		ts := typesOf(evs)
		if len(ts) < 3 || ts[0] != "AGENT_START" || ts[len(ts)-2] != "AGENT_RESULT" || ts[len(ts)-1] != "AGENT_END" {
			t.Fatalf("%s: not §6-shaped: %v", scenario, ts)
		}
		md := evs[len(evs)-2].Data["result"].(map[string]any)["metadata"].(map[string]any)
		if md["agentscope_generate_reason"] != reason {
			t.Fatalf("%s: generate reason %v, want %s", scenario, md["agentscope_generate_reason"], reason)
		}
	}

	evs := chat("thinking_tool_answer", map[string]any{"sessionId": "h-tasks", "input": "tasks"}, nil)
	shaped("thinking_tool_answer", evs, "MODEL_STOP")

	evs = chat("send_attachment", map[string]any{"sessionId": "h-send", "input": "send report"}, nil)
	if d := find(evs, "DATA_BLOCK_DELTA"); d["delta"] != "IyDmiqXlkYoK" { // "# 报告\n"
		t.Fatalf("data block %v", d)
	}
	content := find(evs, "AGENT_RESULT")["result"].(map[string]any)["content"].([]any)
	if last := content[len(content)-1].(map[string]any); last["type"] != "data" || last["name"] != "report.md" {
		t.Fatalf("result content %v", content)
	}

	// A confirmation pause, refused: the paused response and the resumed one are both §6-shaped.
	evs = chat("confirm_refused", map[string]any{"sessionId": "h-confirm", "input": "ask me"}, nil)
	shaped("confirm_refused pause", evs, "PERMISSION_ASKING")
	call := find(evs, "REQUIRE_USER_CONFIRM")["toolCalls"].([]any)[0].(map[string]any)["id"]
	evs = chat("confirm_refused", map[string]any{"sessionId": "h-confirm", "input": "",
		"confirmResults": []any{map[string]any{"toolCallId": call, "confirmed": false}}}, nil)
	shaped("confirm_refused resume", evs, "MODEL_STOP")
	if ts := typesOf(evs); ts[1] != "USER_CONFIRM_RESULT" {
		t.Fatalf("the resumed response opens %v", ts)
	}
	find(evs, "ALL_TOOLS_DENIED")

	// §7.1: a plain resend during a confirmation pause refuses the pending call and is the
	// run's next input.
	evs = chat("confirm_resend", map[string]any{"sessionId": "h-resend", "input": "ask me"}, nil)
	shaped("confirm_resend pause", evs, "PERMISSION_ASKING")
	evs = chat("confirm_resend", map[string]any{"sessionId": "h-resend", "input": "算了，不用写"}, nil)
	shaped("confirm_resend resume", evs, "MODEL_STOP")
	if cr := find(evs, "USER_CONFIRM_RESULT")["confirmResults"].([]any)[0].(map[string]any); cr["confirmed"] != false {
		t.Fatalf("resend: %v", cr)
	}

	// A client-side tool; its result carries a data block.
	tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option",
		"parameters": map[string]any{"type": "object"}}}
	evs = chat("external_tool", map[string]any{"sessionId": "h-ext", "input": "external pick", "externalTools": tools}, nil)
	shaped("external_tool pause", evs, "TOOL_SUSPENDED")
	call = find(evs, "REQUIRE_EXTERNAL_EXECUTION")["toolCalls"].([]any)[0].(map[string]any)["id"]
	output := []any{map[string]any{"type": "text", "text": "B"}, map[string]any{"type": "data", "name": "pick.png",
		"source": map[string]any{"type": "base64", "media_type": "image/png", "data": pngBase64}}}
	evs = chat("external_tool", map[string]any{"sessionId": "h-ext", "input": "",
		"toolResults": []any{map[string]any{"id": call, "name": "client_pick", "output": output}}}, nil)
	shaped("external_tool resume", evs, "MODEL_STOP")
	if out := find(evs, "EXTERNAL_EXECUTION_RESULT")["toolResults"].([]any)[0].(map[string]any)["output"].([]any); len(out) != 2 {
		t.Fatalf("external output %v", out)
	}
	if data := find(evs, "TOOL_RESULT_DATA_DELTA")["data"].(map[string]any); data["name"] != "pick.png" {
		t.Fatalf("data delta %v", data)
	}

	// Listing the workspace comes with the policy hook's hint and team_updated event; the
	// fourth step is past agent.maxIters.
	evs = chat("hint_custom_max_iters", map[string]any{"sessionId": "h-loop", "input": "loop"}, nil)
	shaped("hint_custom_max_iters", evs, "MAX_ITERATIONS")
	if h := find(evs, "HINT_BLOCK"); h["hintSource"] != "policy" || !strings.Contains(str(h["hint"]), "alice") {
		t.Fatalf("hint %v", h)
	}

	// A manual suspend mid-step: REQUEST_STOP; the next request resumes the run.
	evs = chat("request_stop", map[string]any{"sessionId": "h-stop", "input": "slow steps"}, func(ev sse, h http.Header) bool {
		if ev.Data["type"] == "MODEL_CALL_START" {
			if code := d.call("POST", "/api/agent/run/"+h.Get("X-Request-Id")+"/suspend", "", nil); code != http.StatusOK {
				t.Errorf("suspend: %d", code)
			}
		}
		return false
	})
	shaped("request_stop pause", evs, "REASONING_STOP_REQUESTED")
	find(evs, "REQUEST_STOP")
	evs = chat("request_stop", map[string]any{"sessionId": "h-stop", "input": ""}, nil)
	shaped("request_stop resume", evs, "MODEL_STOP")

	// Business middleware pushes a team change and a hint into the session while its run is in
	// progress (the admin route).
	pushed := false
	evs = chat("admin_push", map[string]any{"sessionId": "h-push", "input": "slow steps"}, func(ev sse, _ http.Header) bool {
		if ev.Data["type"] == "MODEL_CALL_START" && !pushed { // the first step takes 2.5 s
			pushed = true
			for _, push := range []string{
				`{"type":"CUSTOM","name":"team_updated","value":{"action":"MEMBER_ADDED","member":"bob","teamId":"team-007"}}`,
				`{"type":"HINT_BLOCK","hint":"bob 加入了会话。","hintSource":"bob"}`,
			} {
				if code := d.call("POST", "/api/users/tester/sessions/h-push/events", push, nil); code != http.StatusCreated {
					t.Errorf("push %s: %d", push, code)
				}
			}
		}
		return false
	})
	shaped("admin_push", evs, "MODEL_STOP")
	if h := find(evs, "HINT_BLOCK"); h["hintSource"] != "bob" {
		t.Fatalf("pushed hint %v", h)
	}

	evs = chat("subagent", map[string]any{"sessionId": "h-sub", "input": "delegate"}, nil)
	shaped("subagent", evs, "MODEL_STOP")
	if e := find(evs, "SUBAGENT_EXPOSED"); e["agentId"] != "researcher" {
		t.Fatalf("exposed %v", e)
	}

	evs = chat("failure", map[string]any{"sessionId": "h-fail", "input": "fatal"}, nil)
	shaped("failure", evs, "INTERRUPTED")

	seen.check(t, "harness", harnessTypes, nil)
}
