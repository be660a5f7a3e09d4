package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A receiver's extras reach the stream and the model: the user_message hook's hint and events, a
// pre_tool_use deny's tool event (an approval URL), each from the real dispatcher over TCP.
func TestHookExtras(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, loopScript, Config{})
		const secret = "hook-secret"
		rcv := newReceiver(t, secret, func(env dispatcher.Envelope) string {
			switch env.HookType {
			case dispatcher.UserMessage:
				return `{"decision":"allow","hint":"alice 加入了会话，可以开始协作。",
					"events":[{"name":"team_updated","value":{"action":"MEMBER_ADDED","member":"alice","teamId":"team-007"}}]}`
			case dispatcher.PreToolUse:
				return `{"decision":"deny","reason":"需要授权","toolEvent":{"category":"auth_required",
					"payload":{"authUrl":"https://example.com/oauth","provider":"mysql"},"userMessage":"需要您授权数据库访问权限"}}`
			}
			return `{"decision":"allow"}`
		})
		for _, typ := range []string{"user_message", "pre_tool_use"} {
			e.hook(`{"hookName":"team-gate","hookType":"` + typ + `","dispatchConfig":{"url":"` + rcv.srv.URL + `","signingSecret":"` + secret + `"}}`)
		}
		info, evs := e.run(StartRequest{Input: "write my tasks"})
		checkSeqs(t, evs, 0)
		var order []string
		for _, ev := range evs {
			switch ev.Kind {
			case KindRunStarted, KindHint, KindCustom, KindModelStarted, KindToolCallEnded, KindToolEvent, KindToolResultEnded:
				order = append(order, string(ev.Kind))
			}
		}
		want := "run.started hint custom model.started tool.call.ended tool.event tool.result.ended model.started"
		if got := strings.Join(order, " "); got != want {
			t.Fatalf("order\n got %s\nwant %s", got, want)
		}
		h := find(evs, KindHint).Block
		if h.Type != BlockHint || h.Text != "alice 加入了会话，可以开始协作。" || h.HintSource == nil || *h.HintSource != "team-gate" {
			t.Fatalf("hint %+v", h)
		}
		c := find(evs, KindCustom).Custom
		var v map[string]string
		if c.Name != "team_updated" || json.Unmarshal(c.Value, &v) != nil || v["member"] != "alice" {
			t.Fatalf("custom %+v", c)
		}
		te := find(evs, KindToolEvent).ToolEvent
		call := find(evs, KindToolCallEnded).Tool
		if te.CallID != call.CallID || te.Name != "workspace_write_file" || te.Category != "auth_required" ||
			te.UserMessage != "需要您授权数据库访问权限" || !strings.Contains(string(te.Payload), `"authUrl":"https://example.com/oauth"`) {
			t.Fatalf("tool event %+v", te)
		}
		if r := find(evs, KindToolResultEnded).Tool; r.State != ToolDenied || r.Error != "需要授权" {
			t.Fatalf("result %+v", r)
		}
		// The model saw the hint before its first call.
		hist, err := e.rt.history(context.Background(), info.SessionID, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) < 2 || hist[1].Text != "[hint from team-gate] alice 加入了会话，可以开始协作。" {
			t.Fatalf("the model saw %+v", hist)
		}
	})
}

// Extras the hook point cannot carry, or malformed ones, are the hook failing: its failureMode
// decides, and nothing of the answer is shown.
func TestHookExtrasMalformed(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), loopScript, Config{})
	rcv := newReceiver(t, "s", func(env dispatcher.Envelope) string {
		return `{"decision":"allow","hint":"shown?","events":[{"name":"team_updated","vlaue":{}}]}`
	})
	e.hook(`{"hookName":"sloppy","hookType":"user_message","dispatchConfig":{"url":"` + rcv.srv.URL + `","signingSecret":"s","failureMode":"DENY"}}`)
	_, evs := e.run(StartRequest{Input: "hello"})
	if find(evs, KindHint) != nil || find(evs, KindCustom) != nil {
		t.Fatalf("a malformed answer was shown: %s", kinds(evs))
	}
	end := find(evs, KindRunEnded).End
	if end.ErrorCode != CodeHookDenied || !strings.Contains(end.ErrorMessage, "sloppy") {
		t.Fatalf("end %+v", end)
	}
}

// A hook's hint given with an ask is kept in the run's state across the pause: the model sees
// it after the resume. Hints to a run that is not running here are refused.
func TestHintSurvivesPause(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	rcv := newReceiver(t, "s", func(env dispatcher.Envelope) string {
		return `{"decision":"ask","reason":"写文件需审批","hint":"审批人: bob"}`
	})
	e.hook(`{"hookName":"gate","hookType":"pre_tool_use","dispatchConfig":{"url":"` + rcv.srv.URL + `","signingSecret":"s"}}`)
	info := e.start("u", "s", "write")
	evs := e.until(info.RequestID, 0, KindSuspended)
	if h := find(evs, KindHint); h == nil || h.Block.Text != "审批人: bob" || *h.Block.HintSource != "gate" {
		t.Fatalf("hint: %s", kinds(evs))
	}
	if _, err := e.rt.Hint(context.Background(), "u", info.RequestID, "bob", "late"); !errors.Is(err, ErrNotLive) {
		t.Fatalf("hint to a suspended run: %v", err)
	}
	if _, err := e.rt.Hint(context.Background(), "other", info.RequestID, "bob", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hint to another user's run: %v", err)
	}
	ask := find(evs, KindAsk).Ask.Calls[0]
	if err := e.rt.Answer(context.Background(), "u", info.RequestID, []Answer{{AskID: ask.AskID, Approved: true}}); err != nil {
		t.Fatal(err)
	}
	e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	hist, err := e.rt.history(context.Background(), info.SessionID, -1)
	if err != nil {
		t.Fatal(err)
	}
	var saw bool
	for _, m := range hist {
		saw = saw || m.Text == "[hint from gate] 审批人: bob"
	}
	if !saw {
		t.Fatalf("the model never saw the hint: %+v", hist)
	}
}
