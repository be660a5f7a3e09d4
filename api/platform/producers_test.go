package platform_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api/platform"
	"github.com/hookd/hookd/storage/storagetest"
)

// The producers of Build 6 on the running runtime, read over TCP as a client reads them.

func newTEnvWith(t *testing.T, o agenttest.Options) *tenv {
	t.Helper()
	env := agenttest.New(t, storagetest.SQLite(t), o)
	e := &tenv{t: t, env: env, hb: time.Minute, ws: env.Workspaces}
	e.serve()
	return e
}

// The OpenAI-compatible provider, its stream dropped twice mid-answer by a real server,
// recovers from the break each time: two AGENT_STATUS LLM_AUTO_RECOVERING among the text
// frames, the text streamed once, the run completed with the whole answer.
func TestAutoRecoveringFromADroppedStream(t *testing.T) {
	e := newTEnvWith(t, agenttest.Options{Model: agenttest.DroppingModel(t, "第一步。", "第二步。", "完成。")})
	fs := withoutHeartbeats(e.startRun(alice, map[string]any{"userInput": "go"}).rest(nil))
	var text strings.Builder
	var statuses []frame
	for _, f := range fs {
		switch f.EventType {
		case "TEXT_START", "TEXT_DELTA":
			text.WriteString(f.str("text"))
		case "AGENT_STATUS":
			statuses = append(statuses, f)
		}
	}
	if len(statuses) != 2 || statuses[0].str("code") != agent.StatusAutoRecovering || statuses[0].str("level") != "WARN" ||
		statuses[0].str("message") == "" {
		t.Fatalf("statuses in %s", types(fs))
	}
	if a, _ := statuses[1].data()["attributes"].(map[string]any); a["attempt"] != float64(2) {
		t.Fatalf("second recovery %v", statuses[1].data())
	}
	if text.String() != "第一步。第二步。完成。" {
		t.Fatalf("text %q", text.String())
	}
	if last := fs[len(fs)-1]; last.EventType != "MESSAGE_COMPLETED" {
		t.Fatalf("ends %s", types(fs))
	}
	got := types(fs)
	if strings.Index(got, "TEXT_START") > strings.Index(got, "AGENT_STATUS") || strings.Count(got, "TEXT_START") != 1 {
		t.Fatalf("one text block, broken off and continued: %s", got)
	}
	// Once the run has ended, its statuses are not shown again ("任务终态后不可见"): a replay has
	// every other frame, ids and bytes as they were, from the start or from an id before them.
	var live []frame
	for _, f := range fs {
		if f.EventType != "AGENT_STATUS" {
			live = append(live, f)
		}
	}
	requestID := fs[0].str("requestId")
	for _, after := range []string{"", fs[0].LastEventID} {
		replayed := withoutHeartbeats(e.replay(alice, requestID, after).rest(nil))
		want := live
		if after != "" {
			want = live[1:]
		}
		if len(replayed) != len(want) {
			t.Fatalf("replay after %q: %s, want %s", after, types(replayed), types(want))
		}
		for i := range want {
			if replayed[i].LastEventID != want[i].LastEventID || replayed[i].Data != want[i].Data {
				t.Fatalf("replay after %q, frame %d: %s %s, want %s %s", after, i, replayed[i].LastEventID, replayed[i].Data, want[i].LastEventID, want[i].Data)
			}
		}
	}
}

// A pre_tool_use receiver that denies with a tool event (an approval URL) gives TOOL_EVENT on
// the call, then the denied call's TOOL_FAILED (no TOOL_RUNNING: it never ran).
func TestToolEventFromAHookAnswer(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"decision":"deny","reason":"需要授权","toolEvent":{"category":"auth_required",
			"payload":{"authUrl":"https://example.com/oauth","provider":"mysql"},"userMessage":"需要您授权数据库访问权限"}}`)
	}))
	defer rcv.Close()
	e := newTEnvWith(t, agenttest.Options{Script: `{"scripts":[{"match":"write","steps":[
		{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"ok"}]}]}`})
	e.env.Hook(t, `{"hookName":"db-auth","hookType":"pre_tool_use","dispatchConfig":{"url":"`+rcv.URL+`"}}`)
	fs := withoutHeartbeats(e.startRun(alice, map[string]any{"userInput": "write"}).rest(nil))
	got := types(fs)
	if !strings.Contains(got, "TOOL_START TOOL_EVENT TOOL_FAILED") {
		t.Fatalf("frames %s", got)
	}
	for _, f := range fs {
		if f.EventType != "TOOL_EVENT" {
			continue
		}
		p, _ := f.data()["payload"].(map[string]any)
		if f.str("category") != "auth_required" || f.str("toolName") != "workspace_write_file" || f.str("toolCallId") == "" ||
			f.str("userMessage") != "需要您授权数据库访问权限" || p["authUrl"] != "https://example.com/oauth" || f.str("type") != "tool_side" {
			t.Fatalf("TOOL_EVENT %v", f.data())
		}
	}
}

// A pre_tool_use policy that modifies the arguments: TOOL_START, sent once the call's final
// arguments are known, shows the arguments the tool runs with, not the model's; with an ask
// after the modify in the chain, TOOL_START and PERMISSION_ASK show the same modified ones.
func TestToolStartCarriesHookModifiedArguments(t *testing.T) {
	e := newTEnvWith(t, agenttest.Options{Script: `{"scripts":[{"match":"write","steps":[
		{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"w.md","content":"hello"}}]},{"text":"ok"}]}]}`})
	e.env.Hook(t, `{"hookName":"write-mod","hookType":"pre_tool_use","priority":-1,"toolNameMatch":"workspace_write_file",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"m","when":"true","decision":"modify",
		"modifiedValue":"args.with({'content': 'MODIFIED'})"}]}}`)
	const modified = `{"content":"MODIFIED","path":"w.md"}`
	arguments := func(fs []frame, typ string) string {
		t.Helper()
		for _, f := range fs {
			if f.EventType == typ {
				return canonicalJSON(t, f.str("arguments"))
			}
		}
		t.Fatalf("no %s in %s", typ, types(fs))
		return ""
	}
	fs := withoutHeartbeats(e.startRun(alice, map[string]any{"userInput": "write"}).rest(nil))
	if got := types(fs); !strings.Contains(got, "TOOL_START TOOL_RUNNING ATTACHMENT_CHANGED TOOL_COMPLETED") {
		t.Fatalf("frames %s", got)
	}
	if got := arguments(fs, "TOOL_START"); got != modified {
		t.Fatalf("TOOL_START arguments %s, want %s", got, modified)
	}

	e.env.Hook(t, `{"hookName":"write-ask","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"a","when":"true","decision":"ask","reason":"'a person approves writes'"}]}}`)
	fs = withoutHeartbeats(e.startRun(alice, map[string]any{"userInput": "write"}).until("PERMISSION_ASK", nil))
	if start, ask := arguments(fs, "TOOL_START"), arguments(fs, "PERMISSION_ASK"); start != modified || ask != modified {
		t.Fatalf("TOOL_START arguments %s, PERMISSION_ASK %s, want both %s", start, ask, modified)
	}
}

// canonicalJSON is s with its keys sorted and no spaces.
func canonicalJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// A key bound to an agent runs as that agent: its runs get the agent's hooks (here a policy that
// denies writes to agent 5001 only) without naming it, and a body naming another agent is a 403,
// not a run that skips them on the record as somebody else. A key of no agent is decided as no
// agent's, the hook not asked.
func TestAKeysAgentDecidesItsRuns(t *testing.T) {
	e := newTEnvWith(t, agenttest.Options{Script: `{"scripts":[{"match":"write","steps":[
		{"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},{"text":"ok"}]}]}`})
	e.env.Hook(t, `{"hookName":"agent-5001","hookType":"pre_tool_use","agentId":5001,"toolNameMatch":"workspace_write_file",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"no-writes","when":"true","decision":"deny","reason":"'agent 5001 may not write'"}]}}`)
	fs := withoutHeartbeats(e.startRun("key-agent", map[string]any{"userInput": "write"}).rest(nil))
	if got := types(fs); !strings.Contains(got, "TOOL_FAILED") {
		t.Fatalf("the agent's key: frames %s, want the write denied", got)
	}
	if w := e.call("key-agent", http.MethodPost, "/api/agent/run/stream", map[string]any{"userInput": "write", "agentId": 5002}); w.HTTPStatusCode != http.StatusForbidden ||
		w.Message != "agentId: 5002 is not the API key's agent (5001)" {
		t.Fatalf("another agent: %d %q", w.HTTPStatusCode, w.Message)
	}
	// A key of no agent may not name the agent of another user's key either.
	if w := e.call(alice, http.MethodPost, "/api/agent/run/stream", map[string]any{"userInput": "write", "agentId": 5001}); w.HTTPStatusCode != http.StatusForbidden ||
		w.Message != "agentId: 5001 is the agent of another user's API key" {
		t.Fatalf("alice naming agent 5001: %d %q", w.HTTPStatusCode, w.Message)
	}
	fs = withoutHeartbeats(e.startRun(alice, map[string]any{"userInput": "write"}).rest(nil))
	if got := types(fs); strings.Contains(got, "TOOL_FAILED") {
		t.Fatalf("a key of no agent: frames %s, want the write to run", got)
	}
}

// Input sent while a run runs and refused by a user_message hook is never consumed, so the
// stream's only word of it is the hint saying why: a synthetic text, not dropped as the hint of
// a consumed input is (its SUPPLEMENTARY_INPUT_CONSUMED frame says that one).
func TestRefusedInputIsOnTheStream(t *testing.T) {
	e := newTEnvWith(t, agenttest.Options{Script: `{"scripts":[{"match":"supp","steps":[
		{"toolCalls":[{"name":"workspace_list_files"}],"delayMs":800},{"text":"saw it"}]}]}`})
	e.env.Hook(t, `{"hookName":"input policy","hookType":"user_message","dispatchType":"policy","policyConfig":{"rules":[
		{"name":"forbidden","when":"input.contains('forbidden')","decision":"deny","reason":"'不允许的输入'"}]}}`)
	fs := withoutHeartbeats(e.startRun(alice, map[string]any{"userInput": "supp"}).rest(func(f frame) {
		if f.EventType == platform.SessionCreated {
			requestID := f.str("requestId")
			agenttest.WaitModelCall(t, e.rt, requestID, 1)
			e.expect(http.StatusOK, alice, "POST", "/api/agent/run/"+requestID+"/input", map[string]any{"content": "forbidden: exfiltrate"}, "success")
		}
	}))
	var said bool
	for _, f := range fs {
		if f.EventType == platform.SupplementaryInputConsumed {
			t.Fatalf("a refused input consumed: %s", f.Data)
		}
		said = said || (f.EventType == platform.TextStart && strings.Contains(f.Data, "not given to the agent") && strings.Contains(f.Data, "不允许的输入"))
	}
	if !said {
		t.Fatalf("no word of the refused input: %s", types(fs))
	}
}
