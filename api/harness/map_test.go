package harness_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/harness"
)

func mapJSON(t *testing.T, ev agent.Event) ([]harness.Event, []json.RawMessage) {
	t.Helper()
	out := harness.Map(ev, "sess-1")
	var raws []json.RawMessage
	for _, e := range out {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	if errs := validateEvents(raws, true); len(errs) > 0 {
		t.Fatalf("%s:\n%s", ev.Kind, strings.Join(errs, "\n"))
	}
	return out, raws
}

var at = time.Date(2026, 9, 18, 10, 30, 45, 123456789, time.FixedZone("CST", 8*3600))

func ev(k agent.Kind) agent.Event {
	return agent.Event{Seq: 3, RunID: "0ABCDEFGHJKMN", ID: "4f9c1e2d8a7b4c5d9e0f1a2b3c4d5e6f", Kind: k, At: at, ReplyID: "reply-7f3a91"}
}

func TestMapCommonFields(t *testing.T) {
	e := ev(agent.KindRunStarted)
	e.Run = &agent.RunInfo{SessionKey: "sess-1", AgentName: "assistant"}
	out, raws := mapJSON(t, e)
	if len(out) != 1 || out[0].ID != e.ID || out[0].CreatedAt != "2026-09-18T02:30:45.123456Z" {
		t.Fatalf("%+v", out)
	}
	want := `{"type":"AGENT_START","id":"4f9c1e2d8a7b4c5d9e0f1a2b3c4d5e6f","createdAt":"2026-09-18T02:30:45.123456Z","sessionId":"sess-1","replyId":"reply-7f3a91","name":"assistant","role":"assistant"}`
	if string(raws[0]) != want {
		t.Fatalf("got  %s\nwant %s", raws[0], want)
	}
	// NON_NULL: nothing but the section's fields; source only for a subagent's events.
	_, raws = mapJSON(t, ev(agent.KindModelStarted))
	if string(raws[0]) != `{"type":"MODEL_CALL_START","id":"4f9c1e2d8a7b4c5d9e0f1a2b3c4d5e6f","createdAt":"2026-09-18T02:30:45.123456Z","replyId":"reply-7f3a91"}` {
		t.Fatalf("%s", raws[0])
	}
	sub := ev(agent.KindModelStarted)
	sub.Source = "main/researcher"
	if out, _ := mapJSON(t, sub); out[0].Source != "main/researcher" {
		t.Fatalf("%+v", out)
	}
}

// Several Harness events from one canonical event get distinct, stable ids.
func TestMapDerivedIDs(t *testing.T) {
	e := ev(agent.KindRunEnded)
	e.End = &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: agent.CodeLLMError, ErrorMessage: "model fatal: boom"}
	a, raws := mapJSON(t, e)
	b := harness.Map(e, "sess-1")
	if len(a) != 2 || a[0].Type != harness.TypeAgentResult || a[1].Type != harness.TypeAgentEnd {
		t.Fatalf("%+v", a)
	}
	if a[0].ID != e.ID || a[1].ID == a[0].ID || !hex32.MatchString(a[1].ID) || a[1].ID != b[1].ID {
		t.Fatalf("ids %s %s %s", a[0].ID, a[1].ID, b[1].ID)
	}
	// Inside Msg, empty fields are null rather than absent.
	if !strings.Contains(string(raws[0]), `"name":null`) || !strings.Contains(string(raws[0]), `"usage":null`) {
		t.Fatalf("%s", raws[0])
	}
	msg := a[0].Result
	if msg.Content[0].Text != "model fatal: boom" || msg.Metadata["agentscope_generate_reason"] != "INTERRUPTED" {
		t.Fatalf("%+v", msg)
	}
	// An event made without an id still gets 32-hex ids.
	e.ID = ""
	if out, _ := mapJSON(t, e); !hex32.MatchString(out[0].ID) || out[0].ID == out[1].ID {
		t.Fatalf("%+v", out)
	}
}

func TestMapResult(t *testing.T) {
	e := ev(agent.KindResult)
	e.Result = &agent.ResultInfo{MsgUUID: "550e8400-e29b-41d4-a716-446655440000", Name: "assistant", Text: "已完成",
		GenerateReason: agent.ReasonModelStop, At: at,
		Usage: &agent.Usage{InputTokens: 1250, OutputTokens: 320, CachedTokens: 512, ReasoningTokens: 9, Seconds: 2.4601234}}
	out, raws := mapJSON(t, e)
	m := out[0].Result
	if m.Timestamp != at.In(time.Local).Format("2006-01-02 15:04:05.000") || m.Usage.TotalTokens != 1570 || m.Usage.Time != 2.46 || *m.Name != "assistant" {
		t.Fatalf("%+v %+v", m, m.Usage)
	}
	want := `"result":{"id":"550e8400-e29b-41d4-a716-446655440000","name":"assistant","role":"ASSISTANT","content":[{"type":"text","text":"已完成"}],"metadata":{"agentscope_generate_reason":"MODEL_STOP"},"timestamp":"` +
		m.Timestamp + `","usage":{"inputTokens":1250,"outputTokens":320,"cachedTokens":512,"time":2.46,"totalTokens":1570}}}`
	if !strings.HasSuffix(string(raws[0]), want) {
		t.Fatalf("got  %s\nwant …%s", raws[0], want)
	}
}

func TestMapPauses(t *testing.T) {
	cases := []struct {
		reason, types, generate string
	}{
		{agent.SuspendPermissionAsk, "AGENT_RESULT AGENT_END", "PERMISSION_ASKING"},
		{agent.SuspendExternalExecution, "AGENT_RESULT AGENT_END", "TOOL_SUSPENDED"},
		{agent.SuspendRequestStop, "AGENT_RESULT AGENT_END", "MIDDLEWARE_STOP_REQUESTED"},
		{agent.SuspendManual, "REQUEST_STOP AGENT_RESULT AGENT_END", "REASONING_STOP_REQUESTED"},
		{agent.SuspendShutdown, "REQUEST_STOP AGENT_RESULT AGENT_END", "INTERRUPTED"},
		{agent.SuspendAsyncTool, "REQUEST_STOP AGENT_RESULT AGENT_END", "TOOL_SUSPENDED"},
		{"SOMETHING_NEW", "REQUEST_STOP AGENT_RESULT AGENT_END", "MIDDLEWARE_STOP_REQUESTED"},
	}
	for _, c := range cases {
		e := ev(agent.KindSuspended)
		e.Suspend = &agent.SuspendInfo{Reason: c.reason, PendingCalls: []agent.PendingCall{}}
		out, _ := mapJSON(t, e)
		var ts []string
		for _, o := range out {
			ts = append(ts, o.Type)
		}
		res := out[len(out)-2]
		if strings.Join(ts, " ") != c.types || res.Result == nil || res.Result.Metadata["agentscope_generate_reason"] != c.generate ||
			(len(out) == 3 && (out[0].GenerateReason != c.generate || out[0].Reason == "")) {
			t.Fatalf("%s: %+v", c.reason, out)
		}
	}
}

func TestMapToolCallsAndResults(t *testing.T) {
	ask := ev(agent.KindAsk)
	ask.Ask = &agent.AskInfo{Calls: []agent.AskCall{{CallID: "c1", Name: "shell_execute", Arguments: `{"command": "rm -rf /workspace/old/"}`},
		{CallID: "c2", Name: "broken", Arguments: `{"a": `}}}
	out, raws := mapJSON(t, ask)
	if !strings.Contains(string(raws[0]), `{"id":"c1","name":"shell_execute","input":{"command":"rm -rf /workspace/old/"},"content":null,"metadata":{},"state":"asking"}`) {
		t.Fatalf("%s", raws[0])
	}
	if tc := out[0].ToolCalls[1]; string(tc.Input) != "{}" || tc.Content == nil || *tc.Content != `{"a": ` {
		t.Fatalf("broken arguments %+v", tc)
	}
	res := ev(agent.KindAskResolved)
	res.Answers = []agent.AskAnswer{{CallID: "c1", Name: "shell_execute", Arguments: `{"command":"a"}`, Input: `{"command":"b"}`, Approved: true,
		Rules: []agent.RuleSpec{{ToolName: "shell_execute", RuleContent: "b", Behavior: "allow", Source: "userSettings"}}},
		{CallID: "c2", Name: "broken", Arguments: `{}`}}
	_, raws = mapJSON(t, res)
	if !strings.Contains(string(raws[0]), `"input":{"command":"b"}`) || !strings.Contains(string(raws[0]), `"rules":null`) {
		t.Fatalf("%s", raws[0])
	}
	d := ev(agent.KindToolResultDelta)
	d.Tool = &agent.ToolInfo{CallID: "c1", Name: "render", OutputDelta: "see:", Data: &agent.DataContent{ID: "d4a3b2c1d5e6f7a8b9c0d1e2f3a4b5c6", Name: "c.png", MediaType: "image/png", Base64: "iVBO"}}
	out, raws = mapJSON(t, d)
	if len(out) != 2 || out[0].Type != harness.TypeToolResultTextDelta || out[1].Type != harness.TypeToolResultDataDelta ||
		!strings.Contains(string(raws[1]), `"data":{"type":"data","source":{"type":"base64","media_type":"image/png","data":"iVBO"},"id":"d4a3b2c1d5e6f7a8b9c0d1e2f3a4b5c6","name":"c.png"}`) {
		t.Fatalf("%s", raws)
	}
	ext := ev(agent.KindExternalResults)
	ext.Results = []agent.ToolOutput{{CallID: "c9", Name: "human_approval_flow", Output: "已批准"}}
	_, raws = mapJSON(t, ext)
	if !strings.Contains(string(raws[0]), `"toolResults":[{"id":"c9","name":"human_approval_flow","output":[{"type":"text","text":"已批准"}],"metadata":{},"state":"success"}]`) {
		t.Fatalf("%s", raws[0])
	}
	mi := ev(agent.KindMaxIters)
	mi.MaxIters = &agent.MaxItersInfo{MaxIters: 10, CurrentIter: 10}
	if _, raws = mapJSON(t, mi); !strings.HasSuffix(string(raws[0]), `"replyId":"reply-7f3a91","maxIters":10,"currentIter":10}`) {
		t.Fatalf("%s", raws[0])
	}
}

func TestMapOtherKinds(t *testing.T) {
	st := ev(agent.KindStatus)
	st.Status = &agent.StatusInfo{Code: agent.StatusRateLimited, Level: "WARN", Message: "模型限流中，正在重试"}
	out, _ := mapJSON(t, st)
	if out[0].Type != harness.TypeCustom || out[0].Name != harness.CustomStatus || !strings.Contains(string(out[0].Value), "LLM_RATE_LIMITED") {
		t.Fatalf("%+v", out)
	}
	if out := harness.Map(ev(agent.KindResumed), "s"); len(out) != 1 || out[0].Type != harness.TypeAgentStart || out[0].ReplyID == "" {
		t.Fatalf("resumed: %+v", out)
	}
	if out := harness.Map(ev("some.future.kind"), "s"); len(out) != 0 {
		t.Fatalf("unknown kind: %+v", out)
	}
	hint := ev(agent.KindHint)
	hint.Block = &agent.Block{ID: "blk-hint-01", Type: agent.BlockHint, Text: "hello"}
	if out, raws := mapJSON(t, hint); out[0].Type != harness.TypeHintBlock || strings.Contains(string(raws[0]), "hintSource") {
		t.Fatalf("%s", raws[0]) // a hint with no source omits it (NON_NULL)
	}
	c := ev(agent.KindCustom)
	c.Custom = &agent.CustomInfo{Name: "state_updated", Value: json.RawMessage("null")}
	if _, raws := mapJSON(t, c); strings.Contains(string(raws[0]), "value") {
		t.Fatalf("%s", raws[0])
	}
}

func TestContentBlocks(t *testing.T) {
	src := `[{"type":"text","text":"a"},{"type":"thinking","thinking":"b"},{"type":"image","source":{"type":"url","url":"https://x/y.png","mime_type":"image/png"}},` +
		`{"type":"audio","source":{"type":"base64","media_type":"audio/wav","data":"UklG"}},{"type":"video","source":{"type":"url","url":"https://x/v.mp4","mime_type":"video/mp4"}},` +
		`{"type":"tool_use","id":"c1","name":"t","input":{"a":1},"content":null,"metadata":{},"state":"pending"},` +
		`{"type":"tool_result","id":"c1","name":"t","output":[{"type":"text","text":"ok"}],"metadata":{},"state":"success"},` +
		`{"type":"hint","hint":"h","hintSource":"alice"},` +
		`{"type":"data","source":{"type":"base64","media_type":"image/png","data":"iVBO"},"id":"d4a3b2c1d5e6f7a8b9c0d1e2f3a4b5c6","name":"chart.png"},` +
		`{"type":"something_new","x":1}]`
	var blocks []harness.ContentBlock
	if err := json.Unmarshal([]byte(src), &blocks); err != nil {
		t.Fatal(err)
	}
	back, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != src {
		t.Fatalf("round trip:\n got  %s\n want %s", back, src)
	}
	if got := harness.PlainText(blocks[:2]); got != "a\nb" {
		t.Fatalf("plain %q", got)
	}
}
