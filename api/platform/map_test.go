package platform_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/platform"
)

func ptr[T any](v T) *T { return &v }

// canonicalEvents are events the runtime cannot produce yet (the tool side channel, a sent
// attachment), cannot produce through this dialect (a client-side tool: EXTERNAL_EXECUTION) or
// only in states hard to reach (a network failure after every retry, the iteration cap, an
// asynchronous call recorded without its AsyncInfo), fed to Map directly; with a hint and a
// subagent's event.
func canonicalEvents() []agent.Event {
	at := time.Date(2026, 5, 7, 10, 30, 0, 0, time.UTC)
	seq := int64(0)
	ev := func(e agent.Event) agent.Event {
		seq++
		e.Seq, e.RunID, e.ID, e.At = seq, "0KXYZ", "evt", at.Add(time.Duration(seq)*time.Second+123*time.Millisecond)
		return e
	}
	msg := int64(20002)
	return []agent.Event{
		ev(agent.Event{Kind: agent.KindRunStarted, Run: &agent.RunInfo{RequestID: "0KXYZ", SessionID: 10001, UserMessageID: 20001, AssistantMessageID: 20002}}),
		ev(agent.Event{Kind: agent.KindModelStarted, Step: 1}),
		ev(agent.Event{Kind: agent.KindHint, Step: 1, TotalTokens: 0, Block: &agent.Block{ID: "blk-1", Type: agent.BlockHint, Text: "（系统提示）后台任务已完成"}}),
		ev(agent.Event{Kind: agent.KindToolEvent, Step: 1, TotalTokens: 512, ToolEvent: &agent.ToolSideEvent{CallID: "call_abc123", Name: "connectDatabase",
			Category: "auth_required", Payload: json.RawMessage(`{"authUrl":"https://example.com/oauth","provider":"mysql"}`), UserMessage: "需要您授权数据库访问权限"}}),
		ev(agent.Event{Kind: agent.KindAttachment, Step: 2, TotalTokens: 768, Attachment: &agent.AttachmentInfo{ID: 30001, SessionID: 10001, MessageID: &msg,
			FileName: "Q3财务分析报告.pdf", Extension: "pdf", ContentType: "application/pdf", Size: 245760, VirtualPath: "/workspace/reports/Q3财务分析报告.pdf",
			Source: "AGENT_GENERATED", ChangeType: "CREATED", Sent: true}}),
		ev(agent.Event{Kind: agent.KindSuspended, Step: 2, TotalTokens: 1024, Suspend: &agent.SuspendInfo{Reason: agent.SuspendAsyncTool, MessageID: 20002, Step: 2,
			PendingCalls: []agent.PendingCall{
				{CallID: "call_def456", Name: "generateReport", Arguments: `{"type":"财务分析"}`, State: "pending", AskID: "task_456"},
				{CallID: "call_ghi789", Name: "sendMail", Arguments: `{}`, State: "pending"}}}}),
		ev(agent.Event{Kind: agent.KindResumed, Step: 2, TotalTokens: 1024}),
		ev(agent.Event{Kind: agent.KindSuspended, Step: 2, TotalTokens: 1024, Suspend: &agent.SuspendInfo{Reason: agent.SuspendExternalExecution, MessageID: 20002, Step: 2,
			PendingCalls: []agent.PendingCall{{CallID: "call_x1", Name: "client_pick", Arguments: `{"options":["A","B"]}`, State: "pending", AskID: "ext_0123456789abcdef0123", External: true}}}}),
		ev(agent.Event{Kind: agent.KindResumed, Step: 2, TotalTokens: 1024}),
		ev(agent.Event{Kind: agent.KindBlockDelta, Source: "main/researcher", Step: 2, Block: &agent.Block{ID: "blk-9", Type: agent.BlockText, Delta: "a subagent's text"}}),
		ev(agent.Event{Kind: agent.KindMaxIters, Step: 3, TotalTokens: 2048, MaxIters: &agent.MaxItersInfo{MaxIters: 3, CurrentIter: 3}}),
		ev(agent.Event{Kind: agent.KindRunEnded, Step: 3, TotalTokens: 2048, End: &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: agent.CodeLLMNetwork,
			ErrorMessage: "模型调用超时，请稍后重试", Recoverable: true, NetworkError: true, MessageID: 20002}}),
	}
}

// The mapping of events the runtime does not produce over HTTP yet has a golden transcript of
// its own, with a heartbeat as the server writes it.
func TestGoldenCanonical(t *testing.T) {
	schema := loadSchema(t)
	var b strings.Builder
	for i, ev := range canonicalEvents() {
		for _, f := range platform.Map(ev) {
			if err := schema.validate(string(f.Encode()), false); err != nil {
				t.Fatalf("%s: %v\n%s", ev.Kind, err, f.Encode())
			}
			b.WriteString("id: " + f.ID + "\ndata: " + string(f.Encode()) + "\n\n")
		}
		if i == 3 {
			hb := platform.HeartbeatFrame(time.Date(2026, 5, 7, 10, 30, 15, 0, time.UTC))
			if err := schema.validate(string(hb), false); err != nil {
				t.Fatal(err)
			}
			b.WriteString("data: " + string(hb) + "\n\n")
		}
	}
	golden(t, "canonical", b.String(), true)
}

func TestFrameIDs(t *testing.T) {
	for _, c := range []struct {
		seq int64
		k   int
		id  string
	}{{1, 0, "1000"}, {42, 0, "42000"}, {42, 1, "42001"}, {42, 12, "42012"}} {
		if got := platform.FrameID(c.seq, c.k); got != c.id {
			t.Fatalf("FrameID(%d,%d) = %s", c.seq, c.k, got)
		}
		cur, err := platform.ParseCursor(c.id)
		if err != nil || cur != (platform.Cursor{Seq: c.seq, K: c.k}) {
			t.Fatalf("ParseCursor(%s) = %+v %v", c.id, cur, err)
		}
		// Resuming after a frame skips it and everything before, and nothing after.
		if !cur.Skip(c.seq, c.k) || !cur.Skip(c.seq-1, 99) || cur.Skip(c.seq, c.k+1) || cur.Skip(c.seq+1, 0) || cur.After() != c.seq-1 {
			t.Fatalf("cursor %+v", cur)
		}
	}
	if cur, err := platform.ParseCursor(""); err != nil || cur.After() != 0 || cur.Skip(1, 0) {
		t.Fatalf("empty cursor %+v %v", cur, err)
	}
	for _, bad := range []string{"x", "-1", "1.", ".1", "1.1", "1.x", "+3", "9007199254740992", "1e3"} {
		if _, err := platform.ParseCursor(bad); err == nil {
			t.Fatalf("ParseCursor(%q) accepted", bad)
		}
	}
}

// One event of several calls yields several frames with ids seq, seq.1, ...; events the
// platform has no type for yield none.
func TestMapFanOutAndSilence(t *testing.T) {
	at := time.Date(2026, 5, 7, 10, 30, 5, 7_000_000, time.UTC)
	ask := agent.Event{Seq: 9, At: at, Kind: agent.KindAsk, Step: 2, TotalTokens: 100, Ask: &agent.AskInfo{Calls: []agent.AskCall{
		{AskID: "ask_1", CallID: "c1", Name: "w", Arguments: "{}", PrincipalID: ptr(int64(7))},
		{AskID: "ask_2", CallID: "c2", Name: "w", Arguments: "{}"}}}}
	fs := platform.Map(ask)
	if len(fs) != 2 || fs[0].ID != "9000" || fs[1].ID != "9001" || fs[0].Timestamp != "2026-05-07T10:30:05.007" || *fs[1].Step != 2 || *fs[1].TotalTokens != 100 {
		t.Fatalf("frames %+v", fs)
	}
	if !strings.Contains(string(fs[0].Encode()), `"principalId":7`) || !strings.Contains(string(fs[1].Encode()), `"principalId":null`) {
		t.Fatalf("principalId: %s %s", fs[0].Encode(), fs[1].Encode())
	}
	for _, k := range []agent.Kind{agent.KindModelStarted, agent.KindModelEnded, agent.KindToolCallStarted, agent.KindToolCallDelta,
		agent.KindToolResultDelta, agent.KindResult, agent.KindResumed, agent.KindAllDenied, agent.KindExternalCalls,
		agent.KindExternalResults, agent.KindCustom} {
		if fs := platform.Map(agent.Event{Seq: 1, Kind: k, Tool: &agent.ToolInfo{}, Result: &agent.ResultInfo{}}); len(fs) != 0 {
			t.Fatalf("%s mapped to %+v", k, fs)
		}
	}
	// Before the first model call there is no step and no token count.
	f := platform.Map(agent.Event{Seq: 3, Kind: agent.KindRunEnded, End: &agent.EndInfo{Outcome: agent.OutcomeFailed, ErrorCode: agent.CodeHookDenied, ErrorMessage: "不允许的输入", MessageID: 2}})
	if len(f) != 1 || f[0].Step != nil || f[0].TotalTokens != nil || !strings.Contains(string(f[0].Encode()), `"step":null,"totalTokens":null`) {
		t.Fatalf("hook deny: %s", f[0].Encode())
	}
}
