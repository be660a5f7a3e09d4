package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookd/hookd/agent/model/modeltest"
	"github.com/hookd/hookd/storage/storagetest"
)

// platformTypes are the event types of platform-sse-and-webhooks.md, "事件类型一览", in the
// document's order.
var platformTypes = []string{
	"SESSION_CREATED", "TEXT_START", "TEXT_DELTA", "TEXT_END", "REASONING_START", "REASONING_DELTA",
	"REASONING_END", "TOOL_START", "TOOL_RUNNING", "TOOL_COMPLETED", "TOOL_FAILED", "TOOL_EVENT",
	"PERMISSION_ASK", "PERMISSION_ASK_RESOLVED", "MESSAGE_COMPLETED", "MESSAGE_SUSPENDED", "MESSAGE_FAILED",
	"SUPPLEMENTARY_INPUT_CONSUMED", "ATTACHMENT_CHANGED", "ATTACHMENT_SENT", "HEARTBEAT", "AGENT_STATUS",
}

// platformStatusCodes are the AGENT_STATUS codes of the same document ("状态码一览"); the
// scenarios produce them all.
var platformStatusCodes = []string{"LLM_RATE_LIMITED", "LLM_NETWORK_RETRYING", "LLM_AUTO_RECOVERING",
	"LLM_EMPTY_RESPONSE_RETRYING", "CONTEXT_COMPACTING"}

// TestPlatformEveryEventType: every type of the document's list comes out of the running daemon
// in a real scenario, and so do the AGENT_STATUS codes.
func TestPlatformEveryEventType(t *testing.T) { eachDatabase(t, testPlatformEveryEventType) }

func testPlatformEveryEventType(t *testing.T, database string) {
	d := startDialectDaemon(t, database, "")
	// Heartbeats come with time, not with the run: they are counted, not golden-checked.
	seen := newTypeSet(func(ev sse) string { return str(ev.Data["eventType"]) }, "HEARTBEAT")
	codes := map[string]bool{}
	run := func(dd *dialectDaemon, scenario, input string, on func(ev sse, requestID string)) []sse {
		t.Helper()
		code, evs := dd.stream("POST", "/api/agent/run/stream", mustJSON(map[string]any{"userInput": input}), func(ev sse, h http.Header) bool {
			if on != nil {
				on(ev, h.Get("X-Request-Id"))
			}
			switch str(ev.Data["eventType"]) {
			case "AGENT_STATUS":
				codes[str(ev.Data["data"].(map[string]any)["code"])] = true
			case "MESSAGE_COMPLETED", "MESSAGE_FAILED":
				return true // the stream closes after them (the document says so); stop reading here
			}
			return false
		})
		if code != http.StatusOK {
			t.Fatalf("%s: status %d", scenario, code)
		}
		seen.add(scenario, evs)
		return evs
	}
	find := func(evs []sse, typ string) map[string]any {
		t.Helper()
		for _, ev := range evs {
			if ev.Data["eventType"] == typ {
				return ev.Data["data"].(map[string]any)
			}
		}
		t.Fatalf("no %s", typ)
		return nil
	}

	run(d, "reasoning_tool_attachment", "tasks", nil)
	if sent := find(run(d, "attachment_sent", "send report", nil), "ATTACHMENT_SENT"); sent["fileName"] != "report.md" {
		t.Fatalf("sent %v", sent)
	}
	// A person is asked (the policy hook answers ask); the stream stays open through the
	// suspension and goes on after the reply.
	run(d, "permission_ask", "ask me", func(ev sse, _ string) {
		if ev.Data["eventType"] == "MESSAGE_SUSPENDED" {
			ask := ev.Data["data"].(map[string]any)["suspendReason"].(map[string]any)["askId"]
			if code := d.call("POST", "/api/agent/permission/reply", mustJSON(map[string]any{"askId": ask, "approved": true}), nil); code != http.StatusOK {
				t.Errorf("reply: %d", code)
			}
		}
	})
	// A slow first step: heartbeats, supplementary input consumed at the step's end, a tool
	// that fails (the file is missing).
	input := false
	run(d, "supplementary_heartbeat_failed_tool", "slow steps", func(ev sse, requestID string) {
		if ev.Data["eventType"] == "SESSION_CREATED" && !input {
			input = true
			if code := d.call("POST", "/api/agent/run/"+requestID+"/input", `{"content":"也看看退款状态"}`, nil); code != http.StatusOK {
				t.Errorf("input: %d", code)
			}
		}
	})
	// The first fetch runs; the policy hook denies the second with an auth_required tool event.
	if te := find(run(d, "tool_event", "fetch it", nil), "TOOL_EVENT"); te["category"] != "auth_required" || te["toolName"] != "http_request" {
		t.Fatalf("tool event %v", te)
	}
	run(d, "agent_status", "ratelimit", nil)
	run(d, "agent_status_network", "netretry", nil)
	run(d, "agent_status_empty", "emptyretry", nil)
	run(d, "failed", "fatal", nil)
	// A history past agent.contextTokens (a large file written, then a listing): the runtime has
	// the model summarise the older turns before the next request.
	if st := find(run(d, "context_compacting", "compact me", nil), "AGENT_STATUS"); st["code"] != "CONTEXT_COMPACTING" || st["level"] != "INFO" {
		t.Fatalf("status %v", st)
	}

	// An OpenAI-compatible model whose stream breaks off twice: the provider goes on from where
	// it broke, saying so.
	drops := modeltest.NewDropping(t, "第一段，", "第二段，", "完成。")
	if database != "" {
		database = storagetest.PostgresURL(t) // a database of its own: not a replica of the first
	}
	od := startDialectDaemon(t, database, "{provider: openai, baseURL: "+drops.URL+", name: m}")
	evs := run(od, "auto_recovering", "hello", nil)
	var text strings.Builder
	for _, ev := range evs {
		if ev.Data["eventType"] == "TEXT_DELTA" || ev.Data["eventType"] == "TEXT_START" {
			text.WriteString(str(ev.Data["data"].(map[string]any)["text"]))
		}
	}
	if text.String() != "第一段，第二段，完成。" || drops.Drops() != 2 {
		t.Fatalf("recovered text %q after %d drops", text.String(), drops.Drops())
	}

	seen.check(t, "platform", platformTypes, nil)
	// LLM_NETWORK_RETRYING and LLM_EMPTY_RESPONSE_RETRYING come from the scripted model's
	// "network" and "empty" errors, which the runtime retries like a real provider's.
	for _, c := range platformStatusCodes {
		if !codes[c] {
			t.Errorf("AGENT_STATUS %s not seen", c)
		}
	}
}
