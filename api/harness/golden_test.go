package harness_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/harness"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/test/golden"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/harness")

// goldenDir is testdata/harness at the module root.
var goldenDir = filepath.Join("..", "..", "testdata", "harness")

// script answers every scenario; one script per input.
const script = `{"scripts":[
 {"match":"plain","steps":[{"text":"你好，我在。","usage":{"inputTokens":10,"outputTokens":5}}]},
 {"match":"/tasks/","steps":[
   {"thinking":"先读取任务源文件，再生成 markdown","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}}],"usage":{"inputTokens":520,"outputTokens":80,"reasoningTokens":12}},
   {"text":"已完成，任务清单已保存至 /workspace/tasks.md","usage":{"inputTokens":1600,"outputTokens":330,"cachedTokens":512}}]},
 {"match":"deny me","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"secret.txt","content":"x"}}]},
   {"text":"好的，不写了"}]},
 {"match":"confirm please","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"original"}}]},
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"b.txt","content":"B"}}]},
   {"text":"done"}]},
 {"match":"both files","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"workspace_write_file","arguments":{"path":"b.txt","content":"B"}}]},
   {"text":"both handled"}]},
 {"match":"external pick","steps":[
   {"toolCalls":[{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"picked"}]},
 {"match":"loop","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}]},{"toolCalls":[{"name":"workspace_list_files"}]},
   {"toolCalls":[{"name":"workspace_list_files"}]},{"toolCalls":[{"name":"workspace_list_files"}]}]},
 {"match":"chart","steps":[
   {"toolCalls":[{"name":"workspace_read_file","arguments":{"path":"chart.png"}}]},
   {"text":"这是生成的图表"}]},
 {"match":"send report","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"report.md","content":"# 报告\n"}}]},
   {"toolCalls":[{"name":"send_attachment","arguments":{"path":"report.md"}}]},
   {"text":"报告已发送"}]},
 {"match":"fatal","steps":[{"error":"fatal","text":"never"}]},
 {"match":"budget","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":50}},
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":50}},
   {"text":"after budget","usage":{"inputTokens":10,"outputTokens":5}}]},
 {"match":"delegate","steps":[
   {"toolCalls":[{"name":"agent_spawn","arguments":{"name":"researcher","task":"research the topic","expose_to_user":true,"label":"数据分析助手"}}]},
   {"text":"the researcher says it is done"}]},
 {"match":"research the topic","steps":[{"thinking":"looking","text":"found three sources"}]},
 {"match":"hinted","steps":[{"toolCalls":[{"name":"workspace_list_files"}],"delayMs":800},{"text":"second"}]},
 {"match":"steps","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":800},
   {"text":"finished"}]},
 {"match":"render async","steps":[
   {"toolCalls":[{"name":"render_job","arguments":{"chart":"sales"}}]},
   {"text":"rendered"}]},
 {"match":"slow","steps":[{"text":"this answer streams slowly","chunkSize":2,"delayMs":1500}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

// png is a 1×1 PNG.
var png, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

// renderJob is an asynchronous tool: it starts work elsewhere and returns at once; the run
// waits for the result to be posted.
type renderJob struct{}

func (renderJob) Spec() tools.Spec {
	return tools.Spec{Name: "render_job", Description: "renders a chart elsewhere", Parameters: json.RawMessage(`{"type":"object"}`), ReadOnly: true}
}

func (renderJob) Run(context.Context, tools.Env, json.RawMessage) (tools.Result, error) {
	return tools.Result{Text: "job queued", Async: &tools.Async{TaskID: "job-7", Timeout: time.Minute, Strategy: "NOTIFY"}}, nil
}

// recorder runs a scenario's requests and keeps what they returned.
type recorder struct {
	t    *testing.T
	e    *env
	exch []exchange
	// raws is every event of the scenario as it came, for the schema checks.
	raws []json.RawMessage
}

type exchange struct {
	Request any               `json:"request"`
	Accept  string            `json:"accept"`
	Status  int               `json:"status"`
	Events  []json.RawMessage `json:"events"`
}

func (r *recorder) chat(body map[string]any, accept string) response {
	r.t.Helper()
	resp := r.e.chat(body, accept)
	if resp.Status != http.StatusOK {
		r.t.Fatalf("status %d: %s", resp.Status, resp.Raw)
	}
	r.record(body, accept, resp.Status, resp.Events)
	return resp
}

func (r *recorder) record(body map[string]any, accept string, status int, evs []json.RawMessage) {
	r.exch = append(r.exch, exchange{Request: body, Accept: accept, Status: status, Events: evs})
	r.raws = append(r.raws, evs...)
}

// stream sends a request and hands each event to on as it arrives (SSE).
func (r *recorder) stream(body map[string]any, on func(ev map[string]any, requestID string)) response {
	r.t.Helper()
	resp, err := http.DefaultClient.Do(r.e.post(body, acceptSSE))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("status %d", resp.StatusCode)
	}
	id := resp.Header.Get("X-Request-Id")
	p := newSSEParser(resp.Body)
	var evs []json.RawMessage
	for {
		ev, err := p.next()
		if err != nil {
			break
		}
		evs = append(evs, json.RawMessage(ev.Data))
		m, err := decode([]byte(ev.Data))
		if err != nil {
			r.t.Fatalf("event %q: %v", ev.Data, err)
		}
		on(m, id)
	}
	r.record(body, acceptSSE, resp.StatusCode, evs)
	return response{Status: resp.StatusCode, Events: evs, RequestID: id}
}

// types lists the types of events.
func types(evs []json.RawMessage) []string {
	var out []string
	for _, raw := range evs {
		var e struct{ Type string }
		_ = json.Unmarshal(raw, &e)
		out = append(out, e.Type)
	}
	return out
}

// first returns the first event of type typ, decoded.
func first(t *testing.T, evs []json.RawMessage, typ string) map[string]any {
	t.Helper()
	for _, raw := range evs {
		m, _ := decode(raw)
		if m["type"] == typ {
			return m
		}
	}
	t.Fatalf("no %s in %v", typ, types(evs))
	return nil
}

func count(evs []json.RawMessage, typ string) int {
	n := 0
	for _, t := range types(evs) {
		if t == typ {
			n++
		}
	}
	return n
}

func toolCallID(t *testing.T, evs []json.RawMessage, typ string) string {
	t.Helper()
	calls := first(t, evs, typ)["toolCalls"].([]any)
	return calls[0].(map[string]any)["id"].(string)
}

func lastType(evs []json.RawMessage) string {
	ts := types(evs)
	if len(ts) == 0 {
		return ""
	}
	return ts[len(ts)-1]
}

type scenario struct {
	name string
	cfg  agent.Config
	run  func(t *testing.T, r *recorder)
}

func body(session, input string, extra ...any) map[string]any {
	b := map[string]any{"sessionId": session, "userId": "user-10001", "input": input}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

var scenarios = []scenario{
	{name: "plain", run: func(t *testing.T, r *recorder) {
		resp := r.chat(body("sess-plain", "plain"), acceptSSE)
		want := "AGENT_START MODEL_CALL_START TEXT_BLOCK_START TEXT_BLOCK_DELTA TEXT_BLOCK_END MODEL_CALL_END AGENT_RESULT AGENT_END"
		if got := strings.Join(types(resp.Events), " "); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}},
	{name: "thinking_tool_answer", run: func(t *testing.T, r *recorder) {
		resp := r.chat(body("sess-tasks", "整理 tasks", "chatModel", map[string]any{"name": "gpt-oss-120b", "stream": true, "temperature": 0.2}), acceptSSE)
		end := first(t, resp.Events, harness.TypeToolResultEnd)
		if end["state"] != "success" || end["toolCallName"] != "workspace_write_file" {
			t.Fatalf("tool end %v", end)
		}
		res := first(t, resp.Events, harness.TypeAgentResult)["result"].(map[string]any)
		if u := res["usage"].(map[string]any); u["totalTokens"].(json.Number).String() != "2530" {
			t.Fatalf("turn usage %v", u)
		}
	}},
	{name: "denied_by_hook", run: func(t *testing.T, r *recorder) {
		const secret = "whsec-harness"
		policy := receiver(t, secret, func(env dispatcher.Envelope) string {
			if env.HookType == dispatcher.PreToolUse {
				return `{"decision":"deny","reason":"写文件需要审批"}`
			}
			return `{"decision":"allow"}`
		})
		r.e.hook(`{"hookName":"policy","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file","dispatchConfig":{"url":"` + policy.URL + `","signingSecret":"` + secret + `"}}`)
		resp := r.chat(body("sess-deny", "deny me"), acceptJSON)
		if end := first(t, resp.Events, harness.TypeToolResultEnd); end["state"] != "denied" {
			t.Fatalf("tool end %v", end)
		}
		first(t, resp.Events, harness.TypeAllToolsDenied)
	}},
	{name: "confirm_resume", cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}, run: func(t *testing.T, r *recorder) {
		p1 := r.chat(body("sess-confirm", "confirm please"), acceptSSE)
		if lastType(p1.Events) != harness.TypeAgentEnd || count(p1.Events, harness.TypeRequireUserConfirm) != 1 {
			t.Fatalf("pause: %v", types(p1.Events))
		}
		callA := toolCallID(t, p1.Events, harness.TypeRequireUserConfirm)
		p2 := r.chat(body("sess-confirm", "", "confirmResults", []any{map[string]any{
			"toolCallId": callA, "confirmed": true, "input": map[string]any{"path": "a.txt", "content": "edited"},
			"rules": []any{map[string]any{"tool_name": "workspace_write_file", "rule_content": "a.txt", "behavior": "allow", "source": "userSettings"}}}}), acceptSSE)
		if types(p2.Events)[0] != harness.TypeAgentStart || types(p2.Events)[1] != harness.TypeUserConfirmResult || count(p2.Events, harness.TypeRequireUserConfirm) != 1 {
			t.Fatalf("resume 1: %v", types(p2.Events))
		}
		callB := toolCallID(t, p2.Events, harness.TypeRequireUserConfirm)
		p3 := r.chat(body("sess-confirm", "", "confirmResults", []any{map[string]any{"toolCallId": callB, "confirmed": false}}), acceptSSE)
		if types(p3.Events)[0] != harness.TypeAgentStart || types(p3.Events)[1] != harness.TypeUserConfirmResult || lastType(p3.Events) != harness.TypeAgentEnd {
			t.Fatalf("resume 2: %v", types(p3.Events))
		}
		first(t, p3.Events, harness.TypeAllToolsDenied)
		if count(p3.Events, harness.TypeUserConfirmResult) != 1 || count(p3.Events, harness.TypeModelCallStart) != 1 {
			t.Fatalf("the second resume repeats the first: %v", types(p3.Events))
		}
		sess, _ := r.e.rt.Session(context.Background(), "user-10001", "sess-confirm")
		dir, _ := r.e.rt.Workspace(sess.ID)
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "edited" {
			t.Fatalf("a.txt holds %q", b)
		}
		if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
			t.Fatal("the denied call ran")
		}
	}},
	{name: "external_resume", run: func(t *testing.T, r *recorder) {
		tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"options": map[string]any{"type": "array"}}}}}
		p1 := r.chat(body("sess-ext", "external pick", "externalTools", tools), acceptSSE)
		call := toolCallID(t, p1.Events, harness.TypeRequireExternalExecution)
		output := []any{map[string]any{"type": "text", "text": "B"},
			map[string]any{"type": "data", "id": "d4a3b2c1d5e6f7a8b9c0d1e2f3a4b5c6", "name": "pick.png",
				"source": map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(png)}}}
		p2 := r.chat(body("sess-ext", "", "toolResults", []any{map[string]any{"id": call, "name": "client_pick",
			"output": output, "state": "success"}}), acceptJSON)
		if types(p2.Events)[0] != harness.TypeAgentStart || types(p2.Events)[1] != harness.TypeExternalExecutionResult {
			t.Fatalf("resume: %v", types(p2.Events))
		}
		// §5.27: the result's ContentBlock array as it was sent; its data block streams as data.
		echoed := first(t, p2.Events, harness.TypeExternalExecutionResult)["toolResults"].([]any)[0].(map[string]any)["output"]
		if a, b := fmt.Sprint(echoed), fmt.Sprint(roundTrip(map[string]any{"o": output}).(map[string]any)["o"]); a != b {
			t.Fatalf("output\n got  %s\n want %s", a, b)
		}
		d := first(t, p2.Events, harness.TypeToolResultDataDelta)["data"].(map[string]any)
		if d["name"] != "pick.png" || d["source"].(map[string]any)["data"] != base64.StdEncoding.EncodeToString(png) {
			t.Fatalf("data delta %v", d)
		}
		if text := first(t, p2.Events, harness.TypeToolResultTextDelta)["delta"]; text != "B\n[data pick.png image/png]" {
			t.Fatalf("text delta %q", text)
		}
		res := first(t, p2.Events, harness.TypeAgentResult)["result"].(map[string]any)
		if res["content"].([]any)[0].(map[string]any)["text"] != "picked" {
			t.Fatalf("result %v", res)
		}
	}},
	{name: "max_iterations", cfg: agent.Config{MaxIters: 3}, run: func(t *testing.T, r *recorder) {
		resp := r.chat(body("sess-loop", "loop"), acceptJSON)
		mi := first(t, resp.Events, harness.TypeExceedMaxIters)
		if mi["maxIters"].(json.Number) != "3" || mi["currentIter"].(json.Number) != "3" {
			t.Fatalf("max iters %v", mi)
		}
		md := first(t, resp.Events, harness.TypeAgentResult)["result"].(map[string]any)["metadata"].(map[string]any)
		if md["agentscope_generate_reason"] != "MAX_ITERATIONS" {
			t.Fatalf("reason %v", md)
		}
	}},
	{name: "data_block", run: func(t *testing.T, r *recorder) {
		sess, _, err := r.e.db.EnsureSession(context.Background(), storage.Session{UserID: "user-10001", Key: "sess-data"})
		if err != nil {
			t.Fatal(err)
		}
		dir, err := r.e.rt.Workspace(sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "chart.png"), png, 0o600); err != nil {
			t.Fatal(err)
		}
		resp := r.chat(body("sess-data", "chart"), acceptSSE)
		d := first(t, resp.Events, harness.TypeToolResultDataDelta)["data"].(map[string]any)
		src := d["source"].(map[string]any)
		got, _ := base64.StdEncoding.DecodeString(src["data"].(string))
		if d["type"] != "data" || src["type"] != "base64" || src["media_type"] != "image/png" || !bytes.Equal(got, png) || d["name"] != "chart.png" {
			t.Fatalf("data %v", d)
		}
	}},
	{name: "send_attachment", run: func(t *testing.T, r *recorder) {
		resp := r.chat(body("sess-send", "send report"), acceptSSE)
		var got []byte
		for _, raw := range resp.Events {
			m, _ := decode(raw)
			if m["type"] == harness.TypeDataBlockDelta {
				piece, err := base64.StdEncoding.DecodeString(m["delta"].(string))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, piece...)
			}
		}
		if string(got) != "# 报告\n" || count(resp.Events, harness.TypeDataBlockStart) != 1 || count(resp.Events, harness.TypeDataBlockEnd) != 1 {
			t.Fatalf("data block %q in %v", got, types(resp.Events))
		}
		content := first(t, resp.Events, harness.TypeAgentResult)["result"].(map[string]any)["content"].([]any)
		d := content[len(content)-1].(map[string]any)
		src := d["source"].(map[string]any)
		inline, _ := base64.StdEncoding.DecodeString(src["data"].(string))
		if d["type"] != "data" || d["name"] != "report.md" || src["type"] != "base64" || src["media_type"] != "text/markdown" || string(inline) != "# 报告\n" {
			t.Fatalf("result content %v", content)
		}
	}},
	{name: "failure", run: func(t *testing.T, r *recorder) {
		resp := r.chat(body("sess-fail", "fatal"), acceptJSON)
		ts := types(resp.Events)
		if ts[len(ts)-2] != harness.TypeAgentResult || ts[len(ts)-1] != harness.TypeAgentEnd {
			t.Fatalf("failure: %v", ts)
		}
		res := first(t, resp.Events, harness.TypeAgentResult)["result"].(map[string]any)
		md := res["metadata"].(map[string]any)
		if md["agentscope_generate_reason"] != "INTERRUPTED" || md["error"].(map[string]any)["code"] != agent.CodeLLMError ||
			!strings.Contains(res["content"].([]any)[0].(map[string]any)["text"].(string), "fatal") {
			t.Fatalf("failure result %v", res)
		}
	}},
	{name: "stop_resume", cfg: agent.Config{TokenBudget: 120}, run: func(t *testing.T, r *recorder) {
		p1 := r.chat(body("sess-budget", "budget"), acceptSSE)
		if stop := first(t, p1.Events, harness.TypeRequestStop); stop["generateReason"] != "MIDDLEWARE_STOP_REQUESTED" || lastType(p1.Events) != harness.TypeAgentEnd {
			t.Fatalf("stop %v in %v", stop, types(p1.Events))
		}
		p2 := r.chat(body("sess-budget", ""), acceptSSE)
		if count(p2.Events, harness.TypeRequestStop) != 1 || count(p2.Events, harness.TypeModelCallStart) != 1 {
			t.Fatalf("second segment: %v", types(p2.Events))
		}
		p3 := r.chat(body("sess-budget", ""), acceptSSE)
		if count(p3.Events, harness.TypeModelCallStart) != 1 || count(p3.Events, harness.TypeRequestStop) != 0 || lastType(p3.Events) != harness.TypeAgentEnd {
			t.Fatalf("last segment: %v", types(p3.Events))
		}
		if res := first(t, p3.Events, harness.TypeAgentResult)["result"].(map[string]any); res["content"].([]any)[0].(map[string]any)["text"] != "after budget" {
			t.Fatalf("result %v", res)
		}
	}},
	{name: "manual_suspend_resume", run: func(t *testing.T, r *recorder) {
		p1 := r.stream(body("sess-suspend", "steps"), func(ev map[string]any, id string) {
			if ev["type"] == harness.TypeModelCallStart {
				if err := r.e.rt.Suspend(context.Background(), "user-10001", id); err != nil {
					t.Errorf("suspend: %v", err)
				}
			}
		})
		if stop := first(t, p1.Events, harness.TypeRequestStop); stop["generateReason"] != "REASONING_STOP_REQUESTED" || lastType(p1.Events) != harness.TypeAgentEnd {
			t.Fatalf("pause %v", types(p1.Events))
		}
		p2 := r.chat(body("sess-suspend", ""), acceptSSE)
		if res := first(t, p2.Events, harness.TypeAgentResult)["result"].(map[string]any); res["content"].([]any)[0].(map[string]any)["text"] != "finished" {
			t.Fatalf("after resume %v", types(p2.Events))
		}
	}},
	{name: "subagent", run: func(t *testing.T, r *recorder) {
		resp := r.chat(body("sess-sub", "delegate"), acceptSSE)
		exp := first(t, resp.Events, harness.TypeSubagentExposed)
		if exp["agentId"] != "researcher" || exp["label"] != "数据分析助手" || !strings.HasPrefix(exp["sessionId"].(string), "sess-sub.researcher-") {
			t.Fatalf("exposed %v", exp)
		}
		var forwarded []string
		for _, raw := range resp.Events {
			m, _ := decode(raw)
			if m["source"] == "main/researcher" {
				forwarded = append(forwarded, m["type"].(string))
			}
		}
		if len(forwarded) == 0 || forwarded[0] != harness.TypeAgentStart || forwarded[len(forwarded)-1] != harness.TypeAgentEnd {
			t.Fatalf("forwarded %v", forwarded)
		}
		if count(resp.Events, harness.TypeAgentEnd) != 2 || lastType(resp.Events) != harness.TypeAgentEnd {
			t.Fatalf("the subagent's end ended the stream: %v", types(resp.Events))
		}
		// The spawn call's result is the subagent's answer, as text.
		var answer string
		for _, raw := range resp.Events {
			m, _ := decode(raw)
			if m["type"] == harness.TypeToolResultTextDelta && m["toolCallName"] == "agent_spawn" && m["source"] == nil {
				answer += m["delta"].(string)
			}
		}
		if answer != "found three sources" {
			t.Fatalf("the spawn result streams %q", answer)
		}
	}},
	{name: "hint_custom", run: func(t *testing.T, r *recorder) {
		done := false
		r.stream(body("sess-hint", "hinted"), func(ev map[string]any, id string) {
			if ev["type"] == harness.TypeModelCallStart && !done {
				done = true
				ctx := context.Background()
				if _, err := r.e.rt.Hint(ctx, "user-10001", id, "alice", "alice 加入了会话，可以开始协作。"); err != nil {
					t.Errorf("hint: %v", err)
				}
				if _, err := r.e.rt.Custom(ctx, "user-10001", id, "team_updated", json.RawMessage(`{"action":"MEMBER_ADDED","member":"bob","teamId":"team-007"}`)); err != nil {
					t.Errorf("custom: %v", err)
				}
			}
		})
		hint := first(t, r.raws, harness.TypeHintBlock)
		if hint["hintSource"] != "alice" || hint["hint"] != "alice 加入了会话，可以开始协作。" {
			t.Fatalf("hint %v", hint)
		}
	}},
	{name: "async_tool_resume", run: func(t *testing.T, r *recorder) {
		r.e.tool.Add(renderJob{})
		p1 := r.chat(body("sess-async", "render async"), acceptSSE)
		stop := first(t, p1.Events, harness.TypeRequestStop)
		if stop["generateReason"] != "TOOL_SUSPENDED" || lastType(p1.Events) != harness.TypeAgentEnd {
			t.Fatalf("pause %v: %v", stop, types(p1.Events))
		}
		call := first(t, p1.Events, harness.TypeToolResultStart)["toolCallId"]
		// A plain request cannot resume it: the run waits for the job's result.
		if resp := r.e.chat(body("sess-async", "hurry"), acceptJSON); resp.Status != http.StatusConflict {
			t.Fatalf("plain request: %d", resp.Status)
		}
		p2 := r.chat(body("sess-async", "", "toolResults", []any{map[string]any{"id": call,
			"output": []any{map[string]any{"type": "text", "text": "chart rendered"}}}}), acceptSSE)
		if types(p2.Events)[0] != harness.TypeAgentStart || types(p2.Events)[1] != harness.TypeExternalExecutionResult || lastType(p2.Events) != harness.TypeAgentEnd {
			t.Fatalf("resume: %v", types(p2.Events))
		}
	}},
	{name: "injected", run: func(t *testing.T, r *recorder) {
		// Shapes the scenarios above do not reach (a URL-sourced tool result and answer, a
		// shutdown pause), through the mapping function. That every type has a real producer
		// is cmd/hookd's TestHarnessEveryEventType.
		at := time.Date(2026, 9, 18, 2, 30, 48, 123456000, time.UTC)
		reply := "reply-7f3a91"
		mk := func(i int, k agent.Kind) agent.Event {
			return agent.Event{Seq: int64(i), RunID: "RUN0000000001", ID: fmt.Sprintf("%032x", i), Kind: k, At: at.Add(time.Duration(i) * time.Millisecond), ReplyID: reply}
		}
		evs := []agent.Event{mk(1, agent.KindRunStarted), mk(2, agent.KindBlockStarted), mk(3, agent.KindBlockDelta),
			mk(4, agent.KindBlockEnded), mk(5, agent.KindToolResultDelta), mk(6, agent.KindResult), mk(7, agent.KindSuspended)}
		evs[0].Run = &agent.RunInfo{SessionKey: "sess-injected", AgentName: "assistant"}
		evs[1].Block = &agent.Block{ID: "blk-003", Type: agent.BlockData}
		evs[2].Block = &agent.Block{ID: "blk-003", Type: agent.BlockData, Delta: base64.StdEncoding.EncodeToString(png)}
		evs[3].Block = &agent.Block{ID: "blk-003", Type: agent.BlockData}
		evs[4].Tool = &agent.ToolInfo{CallID: "call_9f2c4d", Name: "render_chart", Data: &agent.DataContent{ID: "d4a3b2c1d5e6f7a8b9c0d1e2f3a4b5c6",
			Name: "chart.png", MediaType: "image/png", URL: "https://cdn.example.com/tmp/chart.png"}}
		evs[5].Result = &agent.ResultInfo{MsgUUID: "550e8400-e29b-41d4-a716-446655440000", Name: "assistant", Text: "这是生成的图表：",
			Data:           []agent.DataContent{{ID: "d4a3b2c1d5e6f7a8b9c0d1e2f3a4b5c6", Name: "chart.png", MediaType: "image/png", URL: "https://cdn.example.com/chart.png"}},
			GenerateReason: agent.ReasonModelStop, At: at}
		evs[6].Suspend = &agent.SuspendInfo{Reason: agent.SuspendShutdown, Message: "the daemon is shutting down", PendingCalls: []agent.PendingCall{}}
		var out []json.RawMessage
		for _, ev := range evs {
			for _, he := range harness.Map(ev, "sess-injected") {
				b, err := json.Marshal(he)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b)
			}
		}
		r.record(map[string]any{"mapped": "canonical events through harness.Map"}, "", 0, out)
	}},
}

// TestGoldenTranscripts runs every scenario over HTTP against a real runtime and compares its
// transcript, ids and times normalised, with testdata/harness/<scenario>.json (-update rewrites
// them). Every event is checked against the schema of §4–§5 as it came off the wire.
func TestGoldenTranscripts(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db0 *storage.DB) {
		for i, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				db := db0
				if i > 0 { // a database of its own per scenario: numeric ids start alike
					if strings.Contains(t.Name(), "postgres") {
						db = storagetest.Postgres(t)
					} else {
						db = storagetest.SQLite(t)
					}
				}
				r := &recorder{t: t, e: newEnv(t, db, script, sc.cfg)}
				sc.run(t, r)
				if errs := validateEvents(r.raws, true); len(errs) > 0 {
					t.Fatalf("schema:\n%s", strings.Join(errs, "\n"))
				}
				compareGolden(t, sc.name, r.exch)
			})
		}
	})
}

func compareGolden(t *testing.T, name string, exch []exchange) {
	t.Helper()
	var xs []any
	for _, x := range exch {
		xs = append(xs, map[string]any{"request": x.Request, "accept": x.Accept, "status": x.Status, "events": x.Events})
	}
	golden.Compare(t, filepath.Join(goldenDir, name+".json"), map[string]any{"scenario": name, "exchanges": xs}, *update)
}

func roundTrip(v any) any {
	b, _ := json.Marshal(v)
	m, _ := decode(b)
	if m == nil {
		return v
	}
	return m
}

// TestEveryTypeInTranscripts: the golden transcripts hold all 31 event types, each with the
// fields of its section.
func TestEveryTypeInTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	seen := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Exchanges []struct {
				Events []json.RawMessage `json:"events"`
			} `json:"exchanges"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, x := range doc.Exchanges {
			if errs := validateEvents(x.Events, false); len(errs) > 0 {
				t.Errorf("%s:\n%s", f, strings.Join(errs, "\n"))
			}
			for _, typ := range types(x.Events) {
				seen[typ] = append(seen[typ], filepath.Base(f))
			}
		}
	}
	if len(harness.Types) != 31 {
		t.Fatalf("%d types", len(harness.Types))
	}
	for _, typ := range harness.Types {
		if len(seen[typ]) == 0 {
			t.Errorf("%s occurs in no transcript", typ)
		}
	}
	for typ := range seen {
		if _, ok := eventSchema[typ]; !ok {
			t.Errorf("unknown type %s in a transcript", typ)
		}
	}
}
