package volo

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
)

func types(fs []Event) string {
	var b []string
	for _, f := range fs {
		s := f.Type
		if f.Phase != "" {
			s += ":" + f.Phase
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

// Every canonical kind maps to the frames of docs/chat-volo.md, each with the trace, the event's
// id, seq, step and time.
func TestMapEveryKind(t *testing.T) {
	parent := "p-1"
	tr := TraceInfo{SessionID: "s", TurnID: "t-1", ParentTurnID: &parent}
	at := time.Date(2026, 5, 14, 2, 30, 0, 123456789, time.UTC)
	hint := "alice"
	cases := []struct {
		ev   agent.Event
		want string
	}{
		{agent.Event{Kind: agent.KindRunStarted, Run: &agent.RunInfo{RequestID: "r"}}, "PROGRESS:TURN_STARTED"},
		{agent.Event{Kind: agent.KindModelStarted}, "PROGRESS:MODEL_CALL"},
		{agent.Event{Kind: agent.KindModelEnded, Usage: &agent.Usage{InputTokens: 1}}, "PROGRESS:MODEL_DONE"},
		{agent.Event{Kind: agent.KindBlockStarted, Block: &agent.Block{ID: "b", Type: agent.BlockText}}, ""},
		{agent.Event{Kind: agent.KindBlockDelta, Block: &agent.Block{ID: "b", Type: agent.BlockText, Delta: "hi"}}, "ASSISTANT_DELTA"},
		{agent.Event{Kind: agent.KindBlockEnded, Block: &agent.Block{ID: "b", Type: agent.BlockText}}, ""},
		{agent.Event{Kind: agent.KindBlockDelta, Block: &agent.Block{ID: "b", Type: agent.BlockThinking, Delta: "hm"}}, "PROGRESS:THINKING"},
		{agent.Event{Kind: agent.KindBlockStarted, Block: &agent.Block{ID: "d", Type: agent.BlockData,
			Data: &agent.DataContent{MediaType: "image/png", URL: "https://x/a.png"}}}, "RENDER_UI"},
		{agent.Event{Kind: agent.KindHint, Block: &agent.Block{Type: agent.BlockHint, Text: "joined", HintSource: &hint}}, "PROGRESS:HINT"},
		{agent.Event{Kind: agent.KindToolCallStarted, Tool: &agent.ToolInfo{CallID: "c", Name: "n"}}, "TOOL_START"},
		{agent.Event{Kind: agent.KindToolCallDelta, Tool: &agent.ToolInfo{CallID: "c", Name: "n", ArgsDelta: "{"}}, "TOOL_DELTA"},
		{agent.Event{Kind: agent.KindToolCallEnded, Tool: &agent.ToolInfo{CallID: "c", Name: "n", Arguments: "{}"}}, "TOOL_DELTA"},
		{agent.Event{Kind: agent.KindToolResultStarted, Tool: &agent.ToolInfo{CallID: "c", Name: "n"}}, "PROGRESS:TOOL_RUNNING"},
		{agent.Event{Kind: agent.KindToolResultDelta, Tool: &agent.ToolInfo{CallID: "c", Name: "n", OutputDelta: "out"}}, "TOOL_DELTA"},
		{agent.Event{Kind: agent.KindToolResultDelta, Tool: &agent.ToolInfo{CallID: "c", Name: "n",
			Data: &agent.DataContent{MediaType: "image/png", Base64: "AAAA"}}}, "RENDER_UI"},
		{agent.Event{Kind: agent.KindToolResultEnded, Tool: &agent.ToolInfo{CallID: "c", Name: "n", State: agent.ToolSuccess}}, "TOOL_END"},
		{agent.Event{Kind: agent.KindToolResultEnded, Tool: &agent.ToolInfo{CallID: "c", Name: "http_request", State: agent.ToolSuccess,
			Arguments: `{"url":"https://example.com/a","method":"post"}`,
			Output:    "[followed 1 redirect(s) to https://example.com/b]\nHTTP/1.1 201 Created\nContent-Type: text/plain\n\nok"}}, "TOOL_END WEB_FETCH"},
		{agent.Event{Kind: agent.KindToolEvent, ToolEvent: &agent.ToolSideEvent{CallID: "c", Name: "n", Category: "auth_required"}}, "PROGRESS:TOOL_EVENT"},
		{agent.Event{Kind: agent.KindAttachment, Attachment: &agent.AttachmentInfo{ID: 1, FileName: "a.png", ContentType: "image/png"}}, "RENDER_UI"},
		{agent.Event{Kind: agent.KindStatus, Status: &agent.StatusInfo{Code: agent.StatusRateLimited, Message: "wait"}}, "PROGRESS:STATUS"},
		{agent.Event{Kind: agent.KindCustom, Custom: &agent.CustomInfo{Name: "team_updated", Value: json.RawMessage(`{}`)}}, "PROGRESS:CUSTOM"},
		{agent.Event{Kind: agent.KindCustom, Custom: &agent.CustomInfo{Name: "task_progress",
			Value: json.RawMessage(`{"taskId":"r2","name":"researcher","status":"RUNNING","progress":0}`)}}, "SUBAGENT_NOTIFY"},
		{agent.Event{Kind: agent.KindMaxIters, MaxIters: &agent.MaxItersInfo{MaxIters: 3, CurrentIter: 3}}, "PROGRESS:MAX_ITERATIONS"},
		{agent.Event{Kind: agent.KindResult, Result: &agent.ResultInfo{Text: "done", Data: []agent.DataContent{{MediaType: "image/png", URL: "https://x"}}}}, "ASSISTANT_END RENDER_UI"},
		{agent.Event{Kind: agent.KindRunEnded, End: &agent.EndInfo{Outcome: agent.OutcomeCompleted}}, "COMPLETE"},
		{agent.Event{Kind: agent.KindRunEnded, End: &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: agent.CodeHookDenied}}, "ERROR COMPLETE"},
		{agent.Event{Kind: agent.KindRunEnded, End: &agent.EndInfo{Outcome: agent.OutcomeInterrupted}}, "COMPLETE"},
		{agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendPermissionAsk}}, "PROGRESS:PAUSED"},
		{agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendExternalExecution}}, "PROGRESS:PAUSED"},
		{agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendManual}}, "INTERACTION"},
		{agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendRequestStop}}, "INTERACTION"},
		{agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendShutdown}}, "INTERACTION"},
		{agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendAsyncTool,
			PendingCalls: []agent.PendingCall{{CallID: "c", Name: "job", AskID: "async_1"}}, Async: &agent.AsyncInfo{CallID: "c"}}}, "INTERACTION PROGRESS:PAUSED"},
		{agent.Event{Kind: agent.KindResumed}, "PROGRESS:RESUMED"},
		{agent.Event{Kind: agent.KindAsk, Ask: &agent.AskInfo{Calls: []agent.AskCall{{AskID: "a1", CallID: "c1"}, {AskID: "a2", CallID: "c2"}}}}, "INTERACTION INTERACTION"},
		{agent.Event{Kind: agent.KindAskResolved, Answers: []agent.AskAnswer{{AskID: "a1"}}}, "PROGRESS:INTERACTION_RESOLVED"},
		{agent.Event{Kind: agent.KindAllDenied, Calls: []agent.PendingCall{{CallID: "c"}}}, "PROGRESS:ALL_TOOLS_DENIED"},
		{agent.Event{Kind: agent.KindExternalCalls, Calls: []agent.PendingCall{{CallID: "c", AskID: "ext_1", External: true}}}, "INTERACTION"},
		{agent.Event{Kind: agent.KindExternalResults, Results: []agent.ToolOutput{{CallID: "c"}}}, "PROGRESS:TOOL_RESULTS_RECEIVED"},
		{agent.Event{Kind: agent.KindStopRequested, Stop: &agent.StopInfo{Reason: "budget"}}, "PROGRESS:STOP_REQUESTED"},
		{agent.Event{Kind: agent.KindInputConsumed, Input: &agent.InputInfo{Content: "more"}}, "PROGRESS:APPENDED_MESSAGE"},
		{agent.Event{Kind: agent.KindSubagentExposed, Subagent: &agent.SubagentInfo{AgentID: "researcher", SessionID: "s/researcher-1"}}, "SUBAGENT_NOTIFY"},
		{agent.Event{Kind: "some.future.kind"}, "PROGRESS:EVENT"},
	}
	for i, c := range cases {
		c.ev.ID, c.ev.Seq, c.ev.Step, c.ev.At = "e1", int64(i+1), 2, at
		got := Map(c.ev, tr)
		if types(got) != c.want {
			t.Fatalf("%s: %s, want %s", c.ev.Kind, types(got), c.want)
		}
		for _, f := range got {
			if f.TraceInfo != tr || f.EventID != "e1" || f.Seq != int64(i+1) || f.Step != 2 || f.Timestamp != "2026-05-14T02:30:00.123Z" {
				t.Fatalf("%s: frame %+v", c.ev.Kind, f)
			}
			b, _ := json.Marshal(f)
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			if m["type"] != f.Type {
				t.Fatalf("%s: type %v", c.ev.Kind, m["type"])
			}
		}
	}
}

func TestMapDetails(t *testing.T) {
	tr := TraceInfo{SessionID: "s", TurnID: "t-1"}
	web := Map(agent.Event{Kind: agent.KindToolResultEnded, Tool: &agent.ToolInfo{CallID: "c", Name: "http_request", State: agent.ToolSuccess,
		Arguments: `{"url":"https://example.com/a","method":"post"}`,
		Output:    "[followed 1 redirect(s) to https://example.com/b]\nHTTP/1.1 201 Created\n\nok"}}, tr)[1].Web
	if web.URL != "https://example.com/a" || web.Method != "POST" || web.StatusCode != 201 || web.StatusLine != "HTTP/1.1 201 Created" || !web.Success {
		t.Fatalf("web %+v", web)
	}
	search := Map(agent.Event{Kind: agent.KindToolResultEnded, Tool: &agent.ToolInfo{CallID: "c", Name: "web_search", State: agent.ToolSuccess,
		Arguments: `{"query":"季度报告"}`, Output: `[{"title":"T","url":"https://example.com/r","snippet":"s"}]`}}, tr)
	if s := search[1].Search; search[1].Type != TypeWebSearch || s.Query != "季度报告" || !s.Success || len(s.Results) != 1 ||
		s.Results[0] != (tools.SearchResult{Title: "T", URL: "https://example.com/r", Snippet: "s"}) {
		t.Fatalf("search %+v", search)
	}
	searchErr := Map(agent.Event{Kind: agent.KindToolResultEnded, Tool: &agent.ToolInfo{CallID: "c", Name: "web_search", State: agent.ToolError,
		Arguments: `{"query":"x"}`, Output: "search failed: the search backend answered 502 Bad Gateway"}}, tr)[1].Search
	if searchErr.Success || searchErr.Error != "search failed: the search backend answered 502 Bad Gateway" || searchErr.Results == nil {
		t.Fatalf("failed search %+v", searchErr)
	}
	img := Map(agent.Event{Kind: agent.KindToolResultDelta, Tool: &agent.ToolInfo{CallID: "c", Name: "workspace_read_file",
		Data: &agent.DataContent{Name: "a.png", MediaType: "image/png", Base64: "AAAA"}}}, tr)[0].UI
	if img.ComponentType != "IMAGE" || img.URL != "data:image/png;base64,AAAA" || img.ToolCallID != "c" || img.Origin != "TOOL_RESULT" {
		t.Fatalf("image %+v", img)
	}
	ask := Map(agent.Event{Kind: agent.KindAsk, Ask: &agent.AskInfo{Calls: []agent.AskCall{{AskID: "ask_1", CallID: "c1", Name: "w",
		Arguments: "{}", ExpiresAt: time.Unix(0, 0)}}}}, tr)[0].Interaction
	if ask.InteractionID != "ask_1" || ask.ToolCallID != "c1" || ask.InteractionType != InteractionToolApproval || ask.ExpiresAt == "" {
		t.Fatalf("ask %+v", ask)
	}
	manual := Map(agent.Event{Kind: agent.KindSuspended, Suspend: &agent.SuspendInfo{Reason: agent.SuspendManual}}, tr)[0].Interaction
	if manual.InteractionID != "t-1" || manual.InteractionType != InteractionResume || manual.Reason != agent.SuspendManual {
		t.Fatalf("manual %+v", manual)
	}
	failed := Map(agent.Event{Kind: agent.KindRunEnded, End: &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: "LLM_ERROR",
		ErrorMessage: "boom", Recoverable: true}}, tr)
	if failed[0].ErrorCode != "LLM_ERROR" || failed[0].Message != "boom" || !failed[0].Recoverable || failed[1].Status != StatusFailed {
		t.Fatalf("failed %+v", failed)
	}
	// A subagent's events: DISPATCH, NOTIFY keeping the inner frame's fields, COMPLETE; its
	// interactions stay INTERACTION; none of them is terminal.
	sub := func(ev agent.Event) agent.Event { ev.Source = "main/researcher"; return ev }
	start := sub(agent.Event{Kind: agent.KindRunStarted, Run: &agent.RunInfo{RequestID: "r2", SessionKey: "s/researcher-1"}})
	if f := Map(start, tr)[0]; f.Type != TypeSubagentDispatch || f.Subagent.SubagentID != "r2" || f.Subagent.SessionID != "s/researcher-1" || f.Subagent.Name != "researcher" {
		t.Fatalf("dispatch %+v", f.Subagent)
	}
	delta := sub(agent.Event{Kind: agent.KindBlockDelta, Block: &agent.Block{ID: "b", Type: agent.BlockText, Delta: "x"}})
	if f := Map(delta, tr)[0]; f.Type != TypeSubagentNotify || f.Subagent.EventType != TypeAssistantDelta || f.Content != "x" || f.Source != "main/researcher" {
		t.Fatalf("notify %+v", f)
	}
	askSub := sub(agent.Event{Kind: agent.KindAsk, Ask: &agent.AskInfo{Calls: []agent.AskCall{{AskID: "a"}}}})
	if f := Map(askSub, tr)[0]; f.Type != TypeInteraction || f.Source != "main/researcher" {
		t.Fatalf("subagent ask %+v", f)
	}
	end := sub(agent.Event{Kind: agent.KindRunEnded, End: &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: "X"}})
	if f := Map(end, tr); len(f) != 1 || f[0].Type != TypeSubagentComplete || f[0].Subagent.Status != StatusFailed || Terminal(end) {
		t.Fatalf("subagent end %+v", f)
	}
	if !Terminal(agent.Event{Kind: agent.KindRunEnded}) || !Terminal(agent.Event{Kind: agent.KindSuspended}) || Terminal(agent.Event{Kind: agent.KindResult}) {
		t.Fatal("Terminal")
	}
}

func TestModes(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, "FAST": ModeFast, "simple": ModeFast, "MAX": ModeMax,
		"REACT": ModeMax, "Thought": ModeMax, "THINKING": ModeMax} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Fatalf("%q: %s %v", in, got, err)
		}
	}
	if _, err := ParseMode("TURBO"); err == nil {
		t.Fatal("TURBO accepted")
	}
	for in, want := range map[string]Mode{
		"hi": ModeFast, "Hello!": ModeFast, "你好": ModeFast, "谢谢你": ModeFast, "good morning :)": ModeFast, "who are you?": ModeFast,
		"history of rome": ModeMax, "hi, write my tasks to a file": ModeMax, "你好，帮我执行命令": ModeMax, "explain quantum computing": ModeMax,
		"hello " + strings.Repeat("x", 50): ModeMax, "": ModeMax,
	} {
		if got := Classify(in, 0); got != want {
			t.Fatalf("%q: %s, want %s", in, got, want)
		}
	}
	if Classify("hi", 1) != ModeMax {
		t.Fatal("an attachment goes to MAX")
	}
}

func TestCommandParsing(t *testing.T) {
	for in, want := range map[string][3]string{
		"/help": {"/", "help", ""}, "/Tools  now": {"/", "tools", "now"}, "#clear": {"#", "clear", ""}, "/x\targ": {"/", "x", "arg"},
	} {
		tr, name, args, ok := parseCommand(in)
		if !ok || [3]string{tr, name, args} != want {
			t.Fatalf("%q: %q %q %q", in, tr, name, args)
		}
	}
	if _, _, _, ok := parseCommand("@a.md hi"); ok {
		t.Fatal("@ is not a command turn")
	}
	paths, rest := splitFileRefs("@a.md @docs/b.txt\tcompare them")
	if strings.Join(paths, ",") != "a.md,docs/b.txt" || rest != "compare them" {
		t.Fatalf("%v %q", paths, rest)
	}
	if items := completions("/", "h"); len(items) != 1 || items[0].Label != "/help" {
		t.Fatalf("%+v", items)
	}
	if items := completions("", ""); len(items) != len(Commands) {
		t.Fatalf("%d items", len(items))
	}
}

func TestResponses(t *testing.T) {
	for raw, want := range map[string]struct {
		approved bool
		reason   string
	}{
		`"approve"`: {true, ""}, `"同意。"`: {true, ""}, `" OK "`: {true, ""}, `true`: {true, ""},
		`"deny"`: {false, ""}, `false`: {false, ""}, `"选择 B 方案"`: {false, "选择 B 方案"},
		`{"approved":false,"reason":"too risky"}`: {false, "too risky"}, `{"response":"yes"}`: {true, ""},
	} {
		r, e := parseResponse(json.RawMessage(raw))
		if e != nil {
			t.Fatalf("%s: %v", raw, e)
		}
		d := Decision{}
		if len(r.decisions) == 1 {
			d = r.decisions[0]
		}
		approved, reason, ok := d.verdict(r.text)
		if !ok || approved != want.approved || reason != want.reason {
			t.Fatalf("%s: %v %q %v", raw, approved, reason, ok)
		}
	}
	if r, e := parseResponse(nil); e != nil || !r.empty() {
		t.Fatal("absent response")
	}
	if _, e := parseResponse(json.RawMessage(`12`)); e == nil {
		t.Fatal("a number is no response")
	}
	if outputText(json.RawMessage(`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`)) != "ab" ||
		outputText(json.RawMessage(`"x"`)) != "x" || outputText(json.RawMessage(`{"k": 1}`)) != `{"k":1}` {
		t.Fatal("outputText")
	}
	since, err := ParseSince("2026-05-13T00:00:00+08:00")
	if err != nil || !since.Equal(time.Date(2026, 5, 12, 16, 0, 0, 0, time.UTC)) {
		t.Fatalf("since %v %v", since, err)
	}
	if ms, err := ParseSince("1700000000000"); err != nil || ms.UnixMilli() != 1700000000000 {
		t.Fatal("since ms")
	}
}
