package aisdk_test

import (
	"encoding/json"
	"flag"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/aisdk"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/test/golden"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/aisdk")

var goldenDir = filepath.Join("..", "..", "testdata", "aisdk")

// exchange is one request and the parts it was answered with.
type exchange struct {
	Method  string           `json:"method"`
	Path    string           `json:"path"`
	Request any              `json:"request,omitempty"`
	Status  int              `json:"status"`
	Parts   []map[string]any `json:"parts"`
}

type recorder struct {
	t    *testing.T
	e    *env
	exch []exchange
}

func (r *recorder) chat(in map[string]any, on ...func(map[string]any)) response {
	r.t.Helper()
	resp := r.e.stream(in, on...)
	r.check(resp)
	r.exch = append(r.exch, exchange{Method: "POST", Path: "/ai-sdk/chat", Request: in, Status: resp.Status, Parts: resp.Events})
	return resp
}

func (r *recorder) resume(id string, on ...func(map[string]any)) response {
	r.t.Helper()
	resp := r.e.resume(id, nil, on...)
	if resp.Status == http.StatusOK {
		r.check(resp)
	}
	r.exch = append(r.exch, exchange{Method: "GET", Path: "/ai-sdk/chat/" + id + "/stream", Status: resp.Status, Parts: resp.Events})
	return resp
}

func (r *recorder) check(resp response) {
	r.t.Helper()
	if resp.Status != http.StatusOK {
		r.t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	if resp.Header.Get(aisdk.Header) != "v1" || !resp.Done {
		r.t.Fatalf("header %q, [DONE] %v", resp.Header.Get(aisdk.Header), resp.Done)
	}
}

type scenario struct {
	name string
	cfg  agent.Config
	run  func(t *testing.T, r *recorder)
}

// assistant is the assistant message the client holds after a response, its tool parts as
// given.
func assistant(requestID string, parts ...any) map[string]any {
	return map[string]any{"id": aisdk.MessageID(requestID), "role": "assistant", "parts": append([]any{map[string]any{"type": "step-start"}}, parts...)}
}

// textOf is the text the parts stream.
func textOf(parts []map[string]any) string {
	var b strings.Builder
	for _, p := range parts {
		if p["type"] == "text-delta" {
			b.WriteString(p["delta"].(string))
		}
	}
	return b.String()
}

func requestID(t *testing.T, resp response) string {
	t.Helper()
	return first(t, resp.Events, "start")["messageMetadata"].(map[string]any)["requestId"].(string)
}

var scenarios = []scenario{
	{name: "text", run: func(t *testing.T, r *recorder) {
		resp := r.chat(chat("c-text", []any{user("m1", "hello")}))
		want := "start start-step reasoning-start reasoning-delta reasoning-end text-start text-delta text-end finish-step finish"
		if got := types(resp.Events); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		end := last(resp.Events)
		md := end["messageMetadata"].(map[string]any)
		if end["finishReason"] != "stop" || md["usage"].(map[string]any)["totalTokens"] != json.Number("15") {
			t.Fatalf("finish %v", end)
		}
	}},
	{name: "tool", run: func(t *testing.T, r *recorder) {
		resp := r.chat(chat("c-tool", []any{user("m1", "write my tasks")}))
		in := first(t, resp.Events, "tool-input-available")
		out := first(t, resp.Events, "tool-output-available")
		if in["dynamic"] != true || in["input"].(map[string]any)["path"] != "tasks.md" || out["toolCallId"] != in["toolCallId"] {
			t.Fatalf("in %v out %v", in, out)
		}
	}},
	{name: "denied_by_hook", run: func(t *testing.T, r *recorder) {
		r.e.Hook(`{"decision":"deny","reason":"writing files needs a ticket"}`)
		resp := r.chat(chat("c-deny", []any{user("m1", "write the secret")}))
		if e := first(t, resp.Events, "tool-output-error"); !strings.Contains(e["errorText"].(string), "denied: writing files needs a ticket") {
			t.Fatalf("%v", e)
		}
	}},
	{name: "tool_approval", cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}, run: func(t *testing.T, r *recorder) {
		msgs := []any{user("m1", "confirm the write")}
		p1 := r.chat(chat("c-ask", msgs))
		ask := first(t, p1.Events, "tool-approval-request")
		in := first(t, p1.Events, "tool-input-available")
		if last(p1.Events)["finishReason"] != "tool-calls" || ask["toolCallId"] != in["toolCallId"] {
			t.Fatalf("pause %s", types(p1.Events))
		}
		id := requestID(t, p1)
		msgs = append(msgs, assistant(id, map[string]any{"type": "dynamic-tool", "toolName": "workspace_write_file", "toolCallId": in["toolCallId"],
			"state": "approval-responded", "input": in["input"], "approval": map[string]any{"id": ask["approvalId"], "approved": true}}))
		p2 := r.chat(chat("c-ask", msgs))
		if first(t, p2.Events, "start")["messageId"] != aisdk.MessageID(id) || first(t, p2.Events, "tool-output-available")["toolCallId"] != in["toolCallId"] {
			t.Fatalf("resume %s", types(p2.Events))
		}
		if last(p2.Events)["finishReason"] != "stop" {
			t.Fatalf("end %v", last(p2.Events))
		}
	}},
	{name: "tool_approval_refused", cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}, run: func(t *testing.T, r *recorder) {
		msgs := []any{user("m1", "confirm the write")}
		p1 := r.chat(chat("c-ask-no", msgs))
		ask := first(t, p1.Events, "tool-approval-request")
		in := first(t, p1.Events, "tool-input-available")
		msgs = append(msgs, assistant(requestID(t, p1), map[string]any{"type": "dynamic-tool", "toolName": "workspace_write_file",
			"toolCallId": in["toolCallId"], "state": "approval-responded", "input": in["input"],
			"approval": map[string]any{"id": ask["approvalId"], "approved": false, "reason": "not now"}}))
		p2 := r.chat(chat("c-ask-no", msgs))
		if first(t, p2.Events, "tool-output-denied")["toolCallId"] != in["toolCallId"] {
			t.Fatalf("resume %s", types(p2.Events))
		}
	}},
	{name: "client_tool", run: func(t *testing.T, r *recorder) {
		tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"options": map[string]any{"type": "array"}}}}}
		msgs := []any{user("m1", "pick one")}
		p1 := r.chat(chat("c-client", msgs, "tools", tools))
		in := first(t, p1.Events, "tool-input-available")
		if in["dynamic"] != nil || last(p1.Events)["finishReason"] != "tool-calls" {
			t.Fatalf("pause %v %s", in, types(p1.Events))
		}
		msgs = append(msgs, assistant(requestID(t, p1), map[string]any{"type": "tool-client_pick", "toolCallId": in["toolCallId"],
			"state": "output-available", "input": in["input"], "output": "B"}))
		p2 := r.chat(chat("c-client", msgs, "tools", tools))
		if strings.Contains(types(p2.Events), "tool-output") || !strings.Contains(textOf(p2.Events), "You picked it.") {
			t.Fatalf("resume %s", types(p2.Events))
		}
	}},
	{name: "error", run: func(t *testing.T, r *recorder) {
		resp := r.chat(chat("c-error", []any{user("m1", "fatal please")}))
		if e := first(t, resp.Events, "error"); !strings.HasPrefix(e["errorText"].(string), agent.CodeLLMError) || last(resp.Events)["finishReason"] != "error" {
			t.Fatalf("%s", types(resp.Events))
		}
	}},
	{name: "resume_stream", run: func(t *testing.T, r *recorder) {
		// The client loses its stream mid-run; GET …/stream gives the response from its start,
		// then live, to the finish.
		in := chat("c-resume", []any{user("m1", "slow work")})
		p1 := r.e.cut(in, func(p map[string]any) bool { return p["type"] == "start-step" })
		r.exch = append(r.exch, exchange{Method: "POST", Path: "/ai-sdk/chat", Request: in, Status: p1.Status, Parts: p1.Events})
		p2 := r.resume("c-resume")
		if got, want := types(p2.Events)[:len(types(p1.Events))], types(p1.Events); got != want {
			t.Fatalf("the replay does not begin with what was streamed:\n got  %s\n want %s", got, want)
		}
		if last(p2.Events)["finishReason"] != "stop" || !strings.Contains(textOf(p2.Events), "after the restart") {
			t.Fatalf("resume %s", types(p2.Events))
		}
		if p2.Comments == 0 {
			t.Fatal("no heartbeat while the model was slow")
		}
		// Soon after the end the message replays whole, the same again: the SDK replaces the
		// message it holds by its equal.
		if p3 := r.resume("c-resume"); !reflect.DeepEqual(p3.Events, p2.Events) {
			t.Fatalf("a run that just ended:\n got  %s\n want %s", types(p3.Events), types(p2.Events))
		}
	}},
	{name: "resume_after_restart", run: func(t *testing.T, r *recorder) {
		p1 := r.chat(chat("c-restart", []any{user("m1", "slow work")}), func(p map[string]any) {
			if p["type"] == "start-step" {
				r.e.Restart() // the run pauses: its stream finishes
			}
		})
		if last(p1.Events)["finishReason"] != "other" || last(p1.Events)["messageMetadata"].(map[string]any)["generateReason"] != agent.SuspendShutdown {
			t.Fatalf("pause %v", last(p1.Events))
		}
		// The resumed stream is the whole message: the response the restart paused, then the
		// continuation, under the same message id.
		p2 := r.resume("c-restart")
		if got, want := types(p2.Events)[:len(types(p1.Events))], types(p1.Events); got != want {
			t.Fatalf("the replay does not begin with what was streamed:\n got  %s\n want %s", got, want)
		}
		if last(p2.Events)["finishReason"] != "stop" || !strings.Contains(textOf(p2.Events), "after the restart") {
			t.Fatalf("resume %s", types(p2.Events))
		}
		for _, p := range p2.Events {
			if p["type"] == "start" && p["messageId"] != aisdk.MessageID(requestID(t, p1)) {
				t.Fatalf("a start of another message: %v", p)
			}
		}
		if p3 := r.resume("c-restart"); !reflect.DeepEqual(p3.Events, p2.Events) {
			t.Fatalf("a run that just ended:\n got  %s\n want %s", types(p3.Events), types(p2.Events))
		}
	}},
}

// TestGoldenTranscripts runs every scenario over HTTP against a real runtime and compares its
// transcript, ids and times normalised, with testdata/aisdk/<scenario>.json (-update rewrites
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
				golden.Compare(t, filepath.Join(goldenDir, sc.name+".json"), map[string]any{"scenario": sc.name, "exchanges": r.exch}, *update)
			})
		}
	})
}
