package agui_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/test/golden"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/agui")

var goldenDir = filepath.Join("..", "..", "testdata", "agui")

// exchange is one request and the events it was answered with.
type exchange struct {
	Request any              `json:"request"`
	Status  int              `json:"status"`
	Events  []map[string]any `json:"events"`
}

type recorder struct {
	t    *testing.T
	e    *env
	exch []exchange
}

func (r *recorder) run(in map[string]any, on ...func(map[string]any)) response {
	r.t.Helper()
	resp := r.e.stream(in, on...)
	if resp.Status != 200 {
		r.t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	r.exch = append(r.exch, exchange{Request: in, Status: resp.Status, Events: resp.Events})
	return resp
}

type scenario struct {
	name string
	cfg  agent.Config
	run  func(t *testing.T, r *recorder)
}

var scenarios = []scenario{
	{name: "text", run: func(t *testing.T, r *recorder) {
		resp := r.run(input("t-text", "run-1", []any{user("m1", "hello")}))
		want := "RUN_STARTED STATE_SNAPSHOT STEP_STARTED REASONING_START REASONING_MESSAGE_START REASONING_MESSAGE_CONTENT " +
			"REASONING_MESSAGE_END REASONING_END TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED STATE_SNAPSHOT RUN_FINISHED"
		if got := types(resp.Events); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		end := last(resp.Events)
		if end["outcome"].(map[string]any)["type"] != "success" || end["threadId"] != "t-text" || end["runId"] != "run-1" {
			t.Fatalf("end %v", end)
		}
		u := end["usage"].([]any)[0].(map[string]any)
		if u["totalTokens"] != json.Number("15") || u["reasoningTokens"] != json.Number("2") {
			t.Fatalf("usage %v", u)
		}
	}},
	{name: "tool", run: func(t *testing.T, r *recorder) {
		resp := r.run(input("t-tool", "run-1", []any{user("m1", "write my tasks")}))
		res := first(t, resp.Events, "TOOL_CALL_RESULT")
		if res["toolCallId"] != first(t, resp.Events, "TOOL_CALL_START")["toolCallId"] || !strings.Contains(res["content"].(string), "tasks.md") {
			t.Fatalf("result %v", res)
		}
	}},
	{name: "denied_by_hook", run: func(t *testing.T, r *recorder) {
		r.e.Hook(`{"decision":"deny","reason":"writing files needs a ticket"}`)
		resp := r.run(input("t-deny", "run-1", []any{user("m1", "write the secret")}))
		res := first(t, resp.Events, "TOOL_CALL_RESULT")
		if !strings.HasPrefix(res["content"].(string), "denied: ") || !strings.Contains(res["content"].(string), "needs a ticket") {
			t.Fatalf("result %v", res)
		}
		if c := first(t, resp.Events, "CUSTOM"); c["name"] != "hookd.all_denied" {
			t.Fatalf("custom %v", c)
		}
	}},
	{name: "permission_ask", cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}, run: func(t *testing.T, r *recorder) {
		msgs := []any{user("m1", "confirm the write")}
		p1 := r.run(input("t-ask", "run-1", msgs))
		out := last(p1.Events)["outcome"].(map[string]any)
		if out["type"] != "interrupt" {
			t.Fatalf("pause %v", last(p1.Events))
		}
		it := out["interrupts"].([]any)[0].(map[string]any)
		if it["reason"] != "tool_approval" || it["toolCallId"] != first(t, p1.Events, "TOOL_CALL_START")["toolCallId"] {
			t.Fatalf("interrupt %v", it)
		}
		p2 := r.run(input("t-ask", "run-2", msgs, "resume", []any{map[string]any{"interruptId": it["id"], "status": "resolved",
			"payload": map[string]any{"approved": true, "arguments": map[string]any{"path": "a.txt", "content": "edited"}}}}))
		if res := first(t, p2.Events, "TOOL_CALL_RESULT"); res["toolCallId"] != it["toolCallId"] || strings.HasPrefix(res["content"].(string), "denied") {
			t.Fatalf("result %v", res)
		}
		if out := last(p2.Events)["outcome"].(map[string]any); out["type"] != "success" || last(p2.Events)["runId"] != "run-2" {
			t.Fatalf("end %v", last(p2.Events))
		}
		sess, _ := r.e.AE.Runtime.Session(t.Context(), "local", "t-ask")
		dir, _ := r.e.AE.Runtime.Workspace(sess.ID)
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "edited" {
			t.Fatalf("a.txt holds %q", b)
		}
	}},
	{name: "permission_denied", cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}, run: func(t *testing.T, r *recorder) {
		msgs := []any{user("m1", "confirm the write")}
		p1 := r.run(input("t-ask-no", "run-1", msgs))
		it := last(p1.Events)["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
		p2 := r.run(input("t-ask-no", "run-2", msgs, "resume", []any{map[string]any{"interruptId": it["id"], "status": "cancelled"}}))
		if res := first(t, p2.Events, "TOOL_CALL_RESULT"); !strings.HasPrefix(res["content"].(string), "denied: ") {
			t.Fatalf("result %v", res)
		}
	}},
	{name: "client_tool", run: func(t *testing.T, r *recorder) {
		tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"options": map[string]any{"type": "array"}}}}}
		msgs := []any{user("m1", "pick one")}
		p1 := r.run(input("t-client", "run-1", msgs, "tools", tools))
		out := last(p1.Events)["outcome"].(map[string]any)
		call := first(t, p1.Events, "TOOL_CALL_START")
		if out["type"] != "success" || out["pendingToolCallIds"].([]any)[0] != call["toolCallId"] {
			t.Fatalf("pause %v", last(p1.Events))
		}
		msgs = append(msgs,
			map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": call["toolCallId"], "type": "function",
				"function": map[string]any{"name": "client_pick", "arguments": `{"options":["A","B"]}`}}}},
			map[string]any{"id": "tm1", "role": "tool", "toolCallId": call["toolCallId"], "content": "B"})
		p2 := r.run(input("t-client", "run-2", msgs, "tools", tools))
		for _, e := range p2.Events {
			if e["type"] == "TOOL_CALL_RESULT" {
				t.Fatalf("the client's own result came back: %v", e)
			}
		}
		if first(t, p2.Events, "TEXT_MESSAGE_CONTENT") == nil || last(p2.Events)["outcome"].(map[string]any)["type"] != "success" {
			t.Fatalf("resume %s", types(p2.Events))
		}
	}},
	{name: "error", run: func(t *testing.T, r *recorder) {
		resp := r.run(input("t-error", "run-1", []any{user("m1", "fatal please")}))
		end := last(resp.Events)
		if end["type"] != "RUN_ERROR" || end["code"] != agent.CodeLLMError {
			t.Fatalf("end %v", end)
		}
	}},
	{name: "resume_after_restart", run: func(t *testing.T, r *recorder) {
		msgs := []any{user("m1", "slow work")}
		p1 := r.run(input("t-restart", "run-1", msgs), func(ev map[string]any) {
			if ev["type"] == "STEP_STARTED" {
				r.e.Restart() // the run pauses: its stream's last event says so
			}
		})
		it := last(p1.Events)["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
		if it["reason"] != "hookd_suspended" || it["metadata"].(map[string]any)["suspendReason"] != agent.SuspendShutdown {
			t.Fatalf("pause %v", last(p1.Events))
		}
		p2 := r.run(input("t-restart", "run-2", msgs, "resume", []any{map[string]any{"interruptId": it["id"], "status": "resolved"}}))
		if !strings.Contains(fmt.Sprint(p2.Events), "after the restart") || last(p2.Events)["outcome"].(map[string]any)["type"] != "success" {
			t.Fatalf("resume %s", types(p2.Events))
		}
	}},
}

// TestGoldenTranscripts runs every scenario over HTTP against a real runtime and compares its
// transcript, ids and times normalised, with testdata/agui/<scenario>.json (-update rewrites
// them).
func TestGoldenTranscripts(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db0 *storage.DB) {
		for i, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				db := db0
				if i > 0 {
					if strings.Contains(t.Name(), "postgres") {
						db = storagetest.Postgres(t)
					} else {
						db = storagetest.SQLite(t)
					}
				}
				r := &recorder{t: t, e: newEnv(t, db, sc.cfg)}
				sc.run(t, r)
				compareGolden(t, sc.name, r.exch)
			})
		}
	})
}

func compareGolden(t *testing.T, name string, exch []exchange) {
	t.Helper()
	golden.Compare(t, filepath.Join(goldenDir, name+".json"), map[string]any{"scenario": name, "exchanges": exch}, *update)
}
