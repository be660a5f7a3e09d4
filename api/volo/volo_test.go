package volo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/agent/tools"
	"github.com/hookd/hookd/api/volo"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const script = `{"scripts":[
 {"match":"hello","steps":[{"text":"你好！I am FAST.","chunkSize":6,"usage":{"inputTokens":10,"outputTokens":5}}]},
 {"match":"/tasks/","steps":[
   {"thinking":"先写文件","toolCalls":[{"name":"workspace_write_file","arguments":{"path":"tasks.md","content":"- [ ] a"}}],"usage":{"inputTokens":52,"outputTokens":8}},
   {"text":"已保存 tasks.md","usage":{"inputTokens":160,"outputTokens":33}}]},
 {"match":"/append/","steps":[
   {"toolCalls":[{"name":"workspace_list_files","arguments":{}}],"delayMs":1500},
   {"text":"saw the appended text"}]},
 {"match":"/slow/","steps":[{"text":"never finished","delayMs":5000}]},
 {"match":"/catchup/","steps":[
   {"text":"part one","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"part two, the end","delayMs":800}]},
 {"match":"/summari[sz]e/","steps":[{"text":"summary done"}]},
 {"match":"/five steps/","steps":[
   {"text":"第一步。","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"第二步。","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"第三步。","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"第四步。","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"完成。"}]},
 {"match":"*","steps":[{"text":"default answer"}]}
]}`

func intentPath(session string) string { return prefix + "/" + session + "/intent" }

func turnOf(fs []frame) string { return fs[len(fs)-1].ev.TraceInfo.TurnID }

func TestGoldenFast(t *testing.T) {
	e := newEnv(t, opts{script: script})
	g := newGolden(t, "fast")
	path := intentPath("s-fast")
	st, fs := e.stream("POST", path, map[string]any{"userMessage": "hello", "executionMode": "FAST"})
	g.request("POST", path, st)
	g.frames(fs)
	g.check()
	if st != 200 || names(fs) != "PROGRESS:TURN_STARTED PROGRESS:MODEL_CALL ASSISTANT_DELTA ASSISTANT_DELTA ASSISTANT_DELTA PROGRESS:MODEL_DONE ASSISTANT_END COMPLETE" {
		t.Fatalf("%d %s", st, names(fs))
	}
	if fs[0].ev.ExecutionMode != "FAST" || fs[0].ev.TraceInfo.SessionID != "s-fast" || fs[0].ev.TraceInfo.ParentTurnID != nil {
		t.Fatalf("first frame %+v", fs[0].ev)
	}
	run, err := e.rt.RunByReply(context.Background(), "local", turnOf(fs))
	if err != nil || !run.Request.NoTools {
		t.Fatalf("FAST run %v %+v", err, run.Request)
	}
}

func TestGoldenMaxWithTools(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: script})
		g := newGolden(t, "max-tools")
		path := intentPath("s-max")
		st, fs := e.stream("POST", path, map[string]any{"userMessage": "write my tasks", "executionMode": "MAX"})
		g.request("POST", path, st)
		g.frames(fs)
		g.check()
		for _, typ := range []string{volo.TypeToolStart, volo.TypeToolDelta, volo.TypeToolEnd, volo.TypeRenderUI, volo.TypeAssistantEnd, volo.TypeComplete} {
			if find(fs, typ) == nil {
				t.Fatalf("no %s: %s", typ, names(fs))
			}
		}
		if te := find(fs, volo.TypeToolEnd).ev.Tool; te.Status != agent.ToolSuccess || te.ToolName != tools.NameWriteFile {
			t.Fatalf("tool end %+v", te)
		}
		if ui := find(fs, volo.TypeRenderUI).ev.UI; ui.VirtualPath != "/workspace/tasks.md" || ui.ComponentType != "FILE" {
			t.Fatalf("render %+v", ui)
		}
	})
}

func TestGoldenInteractionRoundTrip(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: script, cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
		g := newGolden(t, "interaction")
		path := intentPath("s-ask")
		st, fs := e.stream("POST", path, map[string]any{"userMessage": "write my tasks", "executionMode": "MAX"})
		g.request("POST", path, st)
		g.frames(fs)
		in := find(fs, volo.TypeInteraction)
		if in == nil || in.ev.Interaction.InteractionType != volo.InteractionToolApproval || fs[len(fs)-1].ev.Phase != volo.PhasePaused {
			t.Fatalf("no interaction before the pause: %s", names(fs))
		}
		turn := turnOf(fs)
		ipath := prefix + "/interaction-response/" + in.ev.Interaction.InteractionID
		// A rule for every user is the operator's: a chat user's answer cannot set one, and the
		// refused answer leaves the interaction waiting.
		global := map[string]any{"approved": true, "ruleScope": "global",
			"rules": []map[string]any{{"tool_name": "*", "rule_content": "*", "behavior": "allow", "source": "userSettings"}}}
		if code, r, _ := e.call("POST", ipath, global); code != 403 || r.Message != "agent.error.forbidden" {
			t.Fatalf("a global rule from a chat user: %d %+v", code, r)
		}
		// A decision that names another interaction or tool call is not this one's answer; nor
		// is one of several.
		iid := in.ev.Interaction.InteractionID
		for _, body := range []map[string]any{
			{"response": []map[string]any{{"interactionId": iid + "x", "approved": true}}},
			{"response": map[string]any{"interactionId": "ask_other", "approved": true}},
			{"response": map[string]any{"toolCallId": "call_other", "approved": true}},
			{"toolCallId": "call_other", "approved": true},
			{"response": []map[string]any{{"interactionId": iid, "approved": true}, {"interactionId": iid, "approved": false}}},
		} {
			if code, r, raw := e.call("POST", ipath, body); code != 400 || r.Message == "" {
				t.Fatalf("%v: %d %s", body, code, raw)
			}
		}
		code, _, raw := e.call("POST", ipath, map[string]any{"response": "approve"})
		g.request("POST", ipath, code)
		g.body(raw)
		if code != 200 {
			t.Fatalf("interaction-response %d %s", code, raw)
		}
		// Answered again the same way (a client's resend): accepted, changing nothing; answered
		// otherwise: 409.
		if code, _, raw := e.call("POST", ipath, map[string]any{"approved": true}); code != 200 {
			t.Fatalf("the same answer again %d %s", code, raw)
		}
		code, r, _ := e.call("POST", ipath, map[string]any{"approved": false})
		if code != 409 || r.Message != "agent.error.alreadyAnswered" || !strings.Contains(r.Detail, iid) {
			t.Fatalf("second answer %d %+v", code, r)
		}
		rpath := prefix + "/resume?turnId=" + turn
		st, rest := e.stream("POST", rpath, map[string]any{"turnId": turn})
		g.request("POST", rpath, st)
		g.frames(rest)
		g.check()
		if st != 200 || rest[0].ev.Phase != volo.PhaseResumed || rest[len(rest)-1].ev.Type != volo.TypeComplete || rest[len(rest)-1].ev.Status != volo.StatusCompleted {
			t.Fatalf("resume stream %d %s", st, names(rest))
		}
		if rest[0].ev.Seq != fs[len(fs)-1].ev.Seq+1 {
			t.Fatalf("the resume stream does not start right after the pause: %d then %d", fs[len(fs)-1].ev.Seq, rest[0].ev.Seq)
		}
		for _, f := range rest {
			if f.ev.TraceInfo.TurnID != turn || f.ev.TraceInfo.SessionID != "s-ask" {
				t.Fatalf("resume frame trace %+v", f.ev.TraceInfo)
			}
		}
	})
}

func TestGoldenApprovalRoundTrip(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: script, cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
		g := newGolden(t, "approval")
		path := intentPath("s-approve")
		st, fs := e.stream("POST", path, map[string]any{"userMessage": "write my tasks"})
		g.request("POST", path, st)
		g.frames(fs)
		in := find(fs, volo.TypeInteraction)
		if in == nil {
			t.Fatalf("no interaction: %s", names(fs))
		}
		turn := turnOf(fs)
		apath := prefix + "/tool-approval/" + in.ev.Interaction.ToolCallID
		code, r, raw := e.call("POST", apath, map[string]any{"approved": true, "reason": "用户已确认", "turnId": turn})
		g.request("POST", apath, code)
		g.body(raw)
		data, _ := r.Data.(map[string]any)
		if code != 200 || data["accepted"] != true || data["toolCallId"] != in.ev.Interaction.ToolCallID {
			t.Fatalf("approval %d %s", code, raw)
		}
		if _, err := time.Parse(time.RFC3339, data["timestamp"].(string)); err != nil {
			t.Fatalf("timestamp: %v", err)
		}
		rpath := prefix + "/resume?turnId=" + turn
		st, rest := e.stream("POST", rpath, nil)
		g.request("POST", rpath, st)
		g.frames(rest)
		g.check()
		if find(rest, volo.TypeToolEnd).ev.Tool.Status != agent.ToolSuccess || rest[len(rest)-1].ev.Status != volo.StatusCompleted {
			t.Fatalf("after approval: %s", names(rest))
		}
	})
}

// A pre_tool_use policy that modifies the arguments: the argument deltas are the model's own,
// the final TOOL_DELTA (final: true) carries the arguments the tool runs with, as TOOL_END
// does; with an ask after the modify in the chain, the TOOL_APPROVAL asks about the same ones.
func TestFinalToolDeltaCarriesHookModifiedArguments(t *testing.T) {
	modify := `{"hookName":"write-mod","hookType":"pre_tool_use","priority":-1,"toolNameMatch":"workspace_write_file",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"m","when":"true","decision":"modify",
		"modifiedValue":"args.with({'content': 'MODIFIED'})"}]}}`
	ask := `{"hookName":"write-ask","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file",
		"dispatchType":"policy","policyConfig":{"rules":[{"name":"a","when":"true","decision":"ask","reason":"'a person approves writes'"}]}}`
	isModified := func(what, args string) {
		t.Helper()
		var v map[string]string
		if json.Unmarshal([]byte(args), &v) != nil || v["content"] != "MODIFIED" || v["path"] != "tasks.md" {
			t.Fatalf("%s arguments %q, want the hook's", what, args)
		}
	}
	// final is the arguments of the final TOOL_DELTA, after checking the deltas before it.
	final := func(fs []frame) string {
		t.Helper()
		var deltas strings.Builder
		for _, f := range fs {
			if f.ev.Type != volo.TypeToolDelta || f.ev.Tool.Stream != "arguments" {
				continue
			}
			if f.ev.Tool.Final {
				if got := deltas.String(); !strings.Contains(got, "- [ ] a") {
					t.Fatalf("argument deltas %q, want the model's own", got)
				}
				return f.ev.Tool.Arguments
			}
			deltas.WriteString(f.ev.Tool.Delta)
		}
		t.Fatalf("no final TOOL_DELTA: %s", names(fs))
		return ""
	}

	e := newEnv(t, opts{script: script, hooks: []string{modify}})
	_, fs := e.stream("POST", intentPath("s-mod"), map[string]any{"userMessage": "write my tasks", "executionMode": "MAX"})
	isModified("final TOOL_DELTA", final(fs))
	end := find(fs, volo.TypeToolEnd)
	if end == nil || end.ev.Tool.Status != agent.ToolSuccess {
		t.Fatalf("tool end: %s", names(fs))
	}
	isModified("TOOL_END", end.ev.Tool.Arguments)

	e = newEnv(t, opts{script: script, hooks: []string{modify, ask}})
	_, fs = e.stream("POST", intentPath("s-mod-ask"), map[string]any{"userMessage": "write my tasks", "executionMode": "MAX"})
	isModified("final TOOL_DELTA", final(fs))
	in := find(fs, volo.TypeInteraction)
	if in == nil || in.ev.Interaction.InteractionType != volo.InteractionToolApproval {
		t.Fatalf("no approval: %s", names(fs))
	}
	isModified("TOOL_APPROVAL", in.ev.Interaction.Arguments)
}

// resume?turnId= carrying the response answers the pending interaction itself; free text denies
// the call and is given to the model as the reason.
func TestResumeWithResponse(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: script, cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
		for _, tc := range []struct {
			session, response, state, reason string
		}{
			{"s-yes", "同意", agent.ToolSuccess, "用户已批准"},
			{"s-no", "deny", agent.ToolDenied, "用户拒绝"},
			{"s-text", "选择 B 方案", agent.ToolDenied, "选择 B 方案"},
		} {
			_, fs := e.stream("POST", intentPath(tc.session), map[string]any{"userMessage": "write my tasks"})
			turn := turnOf(fs)
			// Without a response the turn cannot go on: resume replays it to its pause, the
			// INTERACTION included, as a reconnect; with afterSeq at the pause there is nothing
			// left to send and the answer is missing.
			st, again := e.stream("POST", prefix+"/resume?turnId="+turn, map[string]any{})
			if st != 200 {
				t.Fatalf("resume without a response: %d %s", st, names(again))
			}
			sameFrames(t, "resume without a response", again, fs)
			pause := fs[len(fs)-1].ev.Seq
			st, early := e.stream("POST", prefix+"/resume?turnId="+turn, map[string]any{"afterSeq": pause})
			if st != 409 || len(early) != 1 || early[0].ev.ErrorCode != "agent.error.responseRequired" || early[0].ev.TraceInfo.TurnID != turn {
				t.Fatalf("resume after the pause without a response: %d %s", st, names(early))
			}
			st, rest := e.stream("POST", prefix+"/resume", map[string]any{"turnId": turn, "response": tc.response})
			if st != 200 {
				t.Fatalf("%s: %d %s", tc.session, st, names(rest))
			}
			end := find(rest, volo.TypeToolEnd)
			if end == nil || end.ev.Tool.Status != tc.state {
				t.Fatalf("%s: %s", tc.session, names(rest))
			}
			var answers []agent.AskAnswer
			var resolved frame
			for _, f := range rest {
				if f.ev.Phase == volo.PhaseInteractionDone {
					resolved = f
				}
			}
			b, _ := json.Marshal(resolved.ev.Data)
			_ = json.Unmarshal(b, &answers)
			if len(answers) != 1 || answers[0].Reason != tc.reason || answers[0].Approved != (tc.state == agent.ToolSuccess) {
				t.Fatalf("%s: resolved %s", tc.session, b)
			}
			// A second resume streams on from the same pause (the turn has ended since).
			_, replay := e.stream("POST", prefix+"/resume?turnId="+turn, nil)
			if names(replay) != names(rest) {
				t.Fatalf("%s: replay differs:\n%s\n%s", tc.session, names(replay), names(rest))
			}
		}
	})
}

func TestGoldenAppendMidStream(t *testing.T) {
	e := newEnv(t, opts{script: script})
	g := newGolden(t, "append")
	path := intentPath("s-append")
	l := e.open("POST", path, map[string]any{"userMessage": "append please", "executionMode": "MAX"})
	l.until(isPhase(volo.PhaseModelCall))
	apath := prefix + "/s-append/append-message"
	code, r, raw := e.call("POST", apath, map[string]any{"appendedText": "顺便再帮我加一个夜间模式"})
	if code != 200 || r.Message != "success.appended" {
		t.Fatalf("append %d %s", code, raw)
	}
	fs := l.rest()
	g.request("POST", path, 200)
	g.frames(fs)
	g.request("POST", apath, code)
	g.body(raw)
	consumed := find(fs, volo.TypeProgress)
	for i := range fs {
		if fs[i].ev.Phase == volo.PhaseAppendedMessage {
			consumed = &fs[i]
		}
	}
	if consumed.ev.Phase != volo.PhaseAppendedMessage || consumed.ev.Content != "顺便再帮我加一个夜间模式" || consumed.ev.Step != 1 {
		t.Fatalf("appended text not used at the next step: %s", names(fs))
	}

	// FAST: appending is meaningless, 409.
	fl := e.open("POST", intentPath("s-fast-append"), map[string]any{"userMessage": "slow one", "executionMode": "FAST"})
	fl.until(isPhase(volo.PhaseModelCall))
	fpath := prefix + "/s-fast-append/append-message"
	code, r, raw = e.call("POST", fpath, map[string]any{"appendedText": "more"})
	g.request("POST", fpath, code)
	g.body(raw)
	if code != 409 || r.Message != "agent.error.appendNotSupported" {
		t.Fatalf("FAST append %d %s", code, raw)
	}
	// No running turn: 404.
	code, r, raw = e.call("POST", prefix+"/nobody/append-message", map[string]any{"appendedText": "x"})
	g.request("POST", prefix+"/nobody/append-message", code)
	g.body(raw)
	g.check()
	if code != 404 || r.Message != "agent.error.noRunningTask" {
		t.Fatalf("append without a turn %d %s", code, raw)
	}
	if code, _, _ := e.call("POST", prefix+"/s-fast-append/stop", nil); code != 200 {
		t.Fatal("stop")
	}
	fl.rest()
}

func TestGoldenStopMidStream(t *testing.T) {
	e := newEnv(t, opts{script: script})
	g := newGolden(t, "stop")
	path := intentPath("s-stop")
	l := e.open("POST", path, map[string]any{"userMessage": "slow answer please"})
	l.until(isPhase(volo.PhaseModelCall))
	spath := prefix + "/s-stop/stop"
	code, r, raw := e.call("POST", spath, nil)
	if code != 200 || string(raw) != `{"code":200,"message":"success.stopped"}` {
		t.Fatalf("stop %d %s", code, raw)
	}
	fs := l.rest()
	g.request("POST", path, 200)
	g.frames(fs)
	g.request("POST", spath, code)
	g.body(raw)
	last := fs[len(fs)-1].ev
	if last.Type != volo.TypeComplete || last.Status != volo.StatusInterrupted {
		t.Fatalf("after stop: %s", names(fs))
	}
	code, r, raw = e.call("POST", spath, nil)
	g.request("POST", spath, code)
	g.body(raw)
	g.check()
	if code != 404 || r.Message != "agent.error.noRunningTask" {
		t.Fatalf("second stop %d %s", code, raw)
	}
}

func TestGoldenCommands(t *testing.T) {
	e := newEnv(t, opts{script: script})
	g := newGolden(t, "commands")
	parent := "11111111-2222-4333-8444-555555555555"
	for _, msg := range []string{"/help", "/tools", "#tools", "/nope", "@missing.md what is in it?"} {
		path := intentPath("s-cmd")
		st, fs := e.stream("POST", path, map[string]any{"userMessage": msg, "parentTurnId": parent})
		g.request("POST", path+"  "+msg, st)
		g.frames(fs)
		if st != 200 || fs[0].ev.Type != volo.TypeCommandStart || fs[len(fs)-1].ev.Type != volo.TypeComplete {
			t.Fatalf("%s: %d %s", msg, st, names(fs))
		}
		for _, f := range fs {
			if p := f.ev.TraceInfo.ParentTurnID; p == nil || *p != parent || strings.HasPrefix(f.ev.TraceInfo.TurnID, volo.SyntheticPrefix) {
				t.Fatalf("%s: trace %+v", msg, f.ev.TraceInfo)
			}
		}
	}
	cpath := prefix + "/commands?triggerChar=%2F&query=h"
	code, r, raw := e.call("GET", cpath, nil)
	g.request("GET", cpath, code)
	g.body(raw)
	g.check()
	items, _ := r.Data.([]any)
	if code != 200 || len(items) != 1 || items[0].(map[string]any)["label"] != "/help" {
		t.Fatalf("commands %d %s", code, raw)
	}
}

// /clear resets the model's context; @file gives a workspace file to the model.
func TestClearAndFileCommands(t *testing.T) {
	e := newEnv(t, opts{script: script})
	_, fs := e.stream("POST", intentPath("s-file"), map[string]any{"userMessage": "hello"})
	first := turnOf(fs)
	sess, err := e.rt.Session(context.Background(), "local", "s-file")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := e.rt.Workspace(sess.ID)
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs", "notes.md"), []byte("# Notes\nthe launch is on Friday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, fs := e.stream("POST", intentPath("s-file"), map[string]any{"userMessage": "@docs/notes.md summarise it", "parentTurnId": first})
	if st != 200 || names(fs[:3]) != "COMMAND_START COMMAND_RESULT COMMAND_END" || fs[3].ev.Phase != volo.PhaseTurnStarted {
		t.Fatalf("@file: %s", names(fs))
	}
	turn := turnOf(fs)
	for _, f := range fs {
		if f.ev.TraceInfo.TurnID != turn {
			t.Fatalf("the command frames are not of the turn: %+v", f.ev.TraceInfo)
		}
	}
	if find(fs, volo.TypeAssistantEnd).ev.Content != "summary done" || fs[0].ev.ExecutionMode != "" || fs[3].ev.ExecutionMode != "MAX" {
		t.Fatalf("@file turn: %s %+v", names(fs), fs[3].ev)
	}
	_, r, _ := e.call("GET", prefix+"/s-file/messages", nil)
	b, _ := json.Marshal(r.Data)
	var msgs []volo.ChatMessage
	_ = json.Unmarshal(b, &msgs)
	if len(msgs) != 4 || !strings.Contains(msgs[2].Content, "the launch is on Friday") || !strings.HasPrefix(msgs[2].Content, "summarise it") {
		t.Fatalf("the model was not given the file: %s", b)
	}
	// Autocomplete lists the session's files for @.
	_, r, raw := e.call("GET", prefix+"/commands?triggerChar=@&query=docs/&sessionId=s-file", nil)
	if items, _ := r.Data.([]any); len(items) != 1 || items[0].(map[string]any)["label"] != "@docs/notes.md" {
		t.Fatalf("@ completion %s", raw)
	}
	// Escaping the workspace is refused.
	_, fs = e.stream("POST", intentPath("s-file"), map[string]any{"userMessage": "@../../etc/passwd hi"})
	if res := fs[1].ev.Command; res.Success == nil || *res.Success || !strings.Contains(res.Error, "escapes") || fs[len(fs)-1].ev.Status != volo.StatusFailed {
		t.Fatalf("escape: %s %+v", names(fs), fs[1].ev.Command)
	}
	// /clear: the next turn's model call sees none of the earlier messages.
	_, fs = e.stream("POST", intentPath("s-file"), map[string]any{"userMessage": "/clear"})
	if res := fs[1].ev.Command; res.Success == nil || !*res.Success {
		t.Fatalf("/clear %+v", res)
	}
	_, r, _ = e.call("GET", prefix+"/s-file/messages", nil)
	if items, _ := r.Data.([]any); len(items) != 4 {
		t.Fatalf("the history lost messages: %d", len(items))
	}
}

func TestGoldenEarlyErrors(t *testing.T) {
	keys := []wire.APIKey{{Key: "key-alice", UserID: "alice", PrincipalID: 1}, {Key: "key-bob", UserID: "bob", PrincipalID: 2}}
	e := newEnv(t, opts{script: script, keys: keys})
	g := newGolden(t, "early-errors")
	parent := "11111111-2222-4333-8444-555555555555"
	cases := []struct {
		name   string
		path   string
		body   any
		hdr    []string
		status int
		code   string
	}{
		{"no key", intentPath("s1"), map[string]any{"userMessage": "hello", "parentTurnId": parent}, nil, 401, "agent.error.unauthorized"},
		{"wrong key", intentPath("s1"), map[string]any{"userMessage": "hello"}, []string{"Authorization", "Bearer nope"}, 401, "agent.error.unauthorized"},
		{"other user", intentPath("s1"), map[string]any{"userMessage": "hello", "userId": "bob"}, []string{"Authorization", "Bearer key-alice"}, 403, "agent.error.forbidden"},
		{"bad json", intentPath("s1"), `{"userMessage":`, []string{"Authorization", "Bearer key-alice"}, 400, "agent.error.badRequest"},
		{"no message", intentPath("s1"), map[string]any{"userMessage": " "}, []string{"Authorization", "Bearer key-alice"}, 400, "agent.error.badRequest"},
		{"bad mode", intentPath("s1"), map[string]any{"userMessage": "hi", "executionMode": "TURBO"}, []string{"Authorization", "Bearer key-alice"}, 400, "agent.error.badRequest"},
		{"resume no key", prefix + "/resume?turnId=x", map[string]any{}, nil, 401, "agent.error.unauthorized"},
		{"resume unknown turn", prefix + "/resume?turnId=x", map[string]any{}, []string{"Authorization", "Bearer key-alice"}, 404, "agent.error.turnNotFound"},
	}
	for _, tc := range cases {
		st, fs := e.stream("POST", tc.path, tc.body, tc.hdr...)
		g.request("POST", tc.path+"  ("+tc.name+")", st)
		g.frames(fs)
		if st != tc.status || len(fs) != 1 || fs[0].ev.Type != volo.TypeError || fs[0].ev.ErrorCode != tc.code || fs[0].ev.Code != tc.status {
			t.Fatalf("%s: %d %s", tc.name, st, names(fs))
		}
		if !strings.HasPrefix(fs[0].ev.TraceInfo.TurnID, volo.SyntheticPrefix) {
			t.Fatalf("%s: turn %q", tc.name, fs[0].ev.TraceInfo.TurnID)
		}
	}
	// The JSON endpoints answer in the VOLO shape.
	for _, p := range []string{prefix + "/s1/stop", prefix + "/tool-approval/c1"} {
		code, r, raw := e.call("POST", p, map[string]any{"approved": true, "turnId": "t"})
		g.request("POST", p, code)
		g.body(raw)
		if code != 401 || r.Message != "agent.error.unauthorized" {
			t.Fatalf("%s: %d %s", p, code, raw)
		}
	}
	g.check()
	// With the key, alice's turn runs and is hers.
	st, fs := e.stream("POST", intentPath("s1"), map[string]any{"userMessage": "hello"}, "Authorization", "Bearer key-alice")
	if st != 200 || fs[len(fs)-1].ev.Status != volo.StatusCompleted {
		t.Fatalf("alice: %d %s", st, names(fs))
	}
	if _, err := e.rt.RunByReply(context.Background(), "alice", turnOf(fs)); err != nil {
		t.Fatal(err)
	}
}

// One user never reads, resumes, stops, appends to or approves another's session, turn or
// interaction: every attempt is 404, exactly as for things that do not exist.
func TestIsolation(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		keys := []wire.APIKey{{Key: "key-alice", UserID: "alice", PrincipalID: 1}, {Key: "key-bob", UserID: "bob", PrincipalID: 2}}
		e := newEnv(t, opts{db: db, script: script, keys: keys, cfg: agent.Config{DefaultBehavior: agent.BehaviorAsk}})
		alice, bob := []string{"Authorization", "Bearer key-alice"}, []string{"Authorization", "Bearer key-bob"}
		_, fs := e.stream("POST", intentPath("shared"), map[string]any{"userMessage": "write my tasks"}, alice...)
		in := find(fs, volo.TypeInteraction)
		turn := turnOf(fs)
		if in == nil {
			t.Fatalf("no interaction: %s", names(fs))
		}
		for _, c := range []struct {
			method, path string
			body         any
			msg          string
		}{
			{"POST", prefix + "/shared/stop", nil, "agent.error.noRunningTask"},
			{"POST", prefix + "/shared/append-message", map[string]any{"appendedText": "x"}, "agent.error.noRunningTask"},
			{"GET", prefix + "/shared/messages", nil, "agent.error.sessionNotFound"},
			{"POST", prefix + "/interaction-response/" + in.ev.Interaction.InteractionID, map[string]any{"approved": true}, "agent.error.interactionNotFound"},
			{"POST", prefix + "/interaction_response", map[string]any{"interactionId": in.ev.Interaction.InteractionID, "response": "approve"}, "agent.error.interactionNotFound"},
			{"POST", prefix + "/interaction-response/" + turn, map[string]any{"response": "continue"}, "agent.error.interactionNotFound"},
			{"POST", prefix + "/tool-approval/" + in.ev.Interaction.ToolCallID, map[string]any{"approved": true, "turnId": turn}, "agent.error.turnNotFound"},
			{"POST", prefix + "/tool-result/" + in.ev.Interaction.ToolCallID, map[string]any{"output": "x", "turnId": turn}, "agent.error.turnNotFound"},
		} {
			code, r, raw := e.call(c.method, c.path, c.body, bob...)
			if code != 404 || r.Message != c.msg {
				t.Fatalf("bob %s %s: %d %s", c.method, c.path, code, raw)
			}
		}
		st, early := e.stream("POST", prefix+"/resume?turnId="+turn, map[string]any{"response": "approve"}, bob...)
		if st != 404 || early[0].ev.ErrorCode != "agent.error.turnNotFound" || early[0].ev.TraceInfo.TurnID == turn {
			t.Fatalf("bob resume: %d %+v", st, early[0].ev)
		}
		// Bob's own session of the same name is his alone.
		_, bfs := e.stream("POST", intentPath("shared"), map[string]any{"userMessage": "hello", "executionMode": "FAST"}, bob...)
		if bfs[len(bfs)-1].ev.Status != volo.StatusCompleted {
			t.Fatalf("bob's turn: %s", names(bfs))
		}
		// Alice's turn still waits for her; she approves it through the legacy path.
		code, _, raw := e.call("POST", prefix+"/interaction_response", map[string]any{"interactionId": in.ev.Interaction.InteractionID, "approved": true}, alice...)
		if code != 200 {
			t.Fatalf("alice: %d %s", code, raw)
		}
		_, rest := e.stream("POST", prefix+"/resume?turnId="+turn, nil, alice...)
		if rest[len(rest)-1].ev.Status != volo.StatusCompleted {
			t.Fatalf("alice resume: %s", names(rest))
		}
		_, r, _ := e.call("GET", prefix+"/shared/messages", nil, bob...)
		if items, _ := r.Data.([]any); len(items) != 2 {
			t.Fatalf("bob sees %d messages", len(items))
		}
	})
}

// Every frame over TCP parses; the turn tree built from traceInfo has no orphans.
func TestTurnTree(t *testing.T) {
	e := newEnv(t, opts{script: script})
	turns := map[string]bool{}
	var all []frame
	var parent *string
	send := func(msg string, parentTurn *string) []frame {
		body := map[string]any{"userMessage": msg}
		if parentTurn != nil {
			body["parentTurnId"] = *parentTurn
		}
		_, fs := e.stream("POST", intentPath("tree"), body)
		for _, f := range fs {
			turns[f.ev.TraceInfo.TurnID] = true
		}
		all = append(all, fs...)
		return fs
	}
	for _, msg := range []string{"hello", "write my tasks", "/tools", "hello again", "@nothing.md x"} {
		fs := send(msg, parent)
		id := turnOf(fs)
		parent = &id
	}
	// An early error attached to the last turn.
	_, fs := e.stream("POST", intentPath("tree"), map[string]any{"userMessage": "", "parentTurnId": *parent})
	all = append(all, fs...)
	turns[fs[0].ev.TraceInfo.TurnID] = true
	roots := 0
	for _, f := range all {
		tr := f.ev.TraceInfo
		if tr.SessionID != "tree" {
			t.Fatalf("frame of session %q", tr.SessionID)
		}
		if tr.ParentTurnID == nil {
			roots++
			continue
		}
		if !turns[*tr.ParentTurnID] {
			t.Fatalf("orphan: %s frame of turn %s has unknown parent %s", f.ev.Type, tr.TurnID, *tr.ParentTurnID)
		}
	}
	if len(turns) != 6 || roots == 0 {
		t.Fatalf("%d turns, %d root frames", len(turns), roots)
	}
}

// A dropped connection does not stop the turn; messages?since= the last frame's timestamp
// returns what the client missed.
func TestCatchUpAfterDroppedConnection(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, opts{db: db, script: script})
		l := e.open("POST", intentPath("s-drop"), map[string]any{"userMessage": "catchup test"})
		last := l.until(isType(volo.TypeToolEnd))
		turn := last.ev.TraceInfo.TurnID
		l.resp.Body.Close()                           // the connection drops
		waitStatus(t, e, turn, agent.StatusCompleted) // the turn ends, though the client did not stay for it
		code, r, raw := e.call("GET", prefix+"/s-drop/messages?since="+last.ev.Timestamp, nil)
		if code != 200 {
			t.Fatalf("%d %s", code, raw)
		}
		b, _ := json.Marshal(r.Data)
		var msgs []volo.ChatMessage
		_ = json.Unmarshal(b, &msgs)
		// (The user message can share the millisecond of the last frame seen; since is inclusive.)
		if n := len(msgs); n == 0 || n > 2 || msgs[n-1].Role != "assistant" || msgs[n-1].Content != "part onepart two, the end" || msgs[n-1].TurnID != turn {
			t.Fatalf("catch-up: %s", b)
		}
		for _, f := range l.got {
			if strings.Contains(f.ev.Content, "part two") {
				t.Fatal("the client saw the part it should have missed")
			}
		}
		// Without since: everything, ascending.
		_, r, _ = e.call("GET", prefix+"/s-drop/messages", nil)
		b, _ = json.Marshal(r.Data)
		msgs = nil
		_ = json.Unmarshal(b, &msgs)
		if len(msgs) != 2 || msgs[0].Role != "user" || msgs[0].ID > msgs[1].ID || msgs[0].CreatedAt > msgs[1].CreatedAt {
			t.Fatalf("history: %s", b)
		}
		// The document's own example, sent as written: its "+" arrives as a space.
		code, r, raw = e.call("GET", prefix+"/s-drop/messages?since=2026-05-13T00:00:00+08:00", nil)
		b, _ = json.Marshal(r.Data)
		var since []volo.ChatMessage
		_ = json.Unmarshal(b, &since)
		if code != 200 || len(since) != len(msgs) {
			t.Fatalf("since, the document's example verbatim: %d %s", code, raw)
		}
		if code, r, _ := e.call("GET", prefix+"/s-drop/messages?since=yesterday", nil); code != 400 || r.Message != "agent.error.badRequest" {
			t.Fatalf("bad since: %d", code)
		}
	})
}

func TestAutoModeAndAttachments(t *testing.T) {
	e := newEnv(t, opts{script: script})
	_, fs := e.stream("POST", intentPath("s-auto"), map[string]any{"userMessage": "hello!"})
	if fs[0].ev.ExecutionMode != "FAST" {
		t.Fatalf("greeting: %s", fs[0].ev.ExecutionMode)
	}
	_, fs = e.stream("POST", intentPath("s-auto"), map[string]any{"userMessage": "hello, write my tasks", "executionMode": "react"})
	if fs[0].ev.ExecutionMode != "MAX" || find(fs, volo.TypeToolEnd) == nil {
		t.Fatalf("legacy REACT: %s %s", fs[0].ev.ExecutionMode, names(fs))
	}
	_, fs = e.stream("POST", intentPath("s-auto"), map[string]any{"userMessage": "write my tasks", "executionMode": "SIMPLE"})
	if fs[0].ev.ExecutionMode != "FAST" || find(fs, volo.TypeToolStart) != nil {
		t.Fatalf("legacy SIMPLE ran tools: %s", names(fs))
	}
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	st, fs := e.stream("POST", intentPath("s-att"), map[string]any{"userMessage": "hello", "sessionId": "s-att", "attachments": []any{
		map[string]any{"type": "image", "mimeType": "image/png", "base64": png, "name": "dot.png"},
		map[string]any{"type": "image", "url": "https://example.com/cat.jpg"},
		map[string]any{"type": "document", "name": "spec.txt", "mediaType": "text/plain", "content": "the spec says 42"},
		map[string]any{"name": "notes.md", "mediaType": "text/markdown", "data": "IyBub3Rlcw=="},
	}})
	if st != 200 || fs[0].ev.ExecutionMode != "MAX" {
		t.Fatalf("attachments: %d %s %s", st, fs[0].ev.ExecutionMode, names(fs))
	}
	sess, _ := e.rt.Session(context.Background(), "local", "s-att")
	msgs, err := e.db.Messages(context.Background(), sess.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var user struct {
		Text   string   `json:"text"`
		Images []string `json:"images"`
	}
	_ = json.Unmarshal(msgs[0].Body, &user)
	if len(user.Images) != 2 || user.Images[0] != "data:image/png;base64,"+png || user.Images[1] != "https://example.com/cat.jpg" ||
		!strings.Contains(user.Text, "the spec says 42") || !strings.Contains(user.Text, "# notes") || !strings.HasPrefix(user.Text, "hello") {
		t.Fatalf("the model's user message: %s", msgs[0].Body)
	}
	for _, bad := range []map[string]any{
		{"userMessage": "x", "sessionId": "other"},
		{"userMessage": "x", "attachments": []any{map[string]any{"type": "image", "url": "ftp://x"}}},
		{"userMessage": "x", "attachments": []any{map[string]any{"type": "document", "data": "AAEC", "mediaType": "application/pdf"}}},
		{"userMessage": "x", "attachments": []any{map[string]any{"type": "hologram", "url": "https://x"}}},
		// A field an attachment does not have (a typo would make a document's text vanish), and
		// two names of one thing that disagree.
		{"userMessage": "x", "attachments": []any{map[string]any{"type": "document", "conten": "# notes"}}},
		{"userMessage": "x", "attachments": []any{map[string]any{"type": "image", "url": "https://x/y.png", "foo": 1}}},
		{"userMessage": "x", "attachments": []any{map[string]any{"url": "https://x/y.png", "mediaType": "image/png", "mimeType": "image/gif"}}},
	} {
		if st, fs := e.stream("POST", intentPath("s-att"), bad); st != 400 || fs[0].ev.ErrorCode != "agent.error.badRequest" {
			t.Fatalf("%v: %d %s", bad, st, names(fs))
		}
	}
}

// http_request results are WEB_FETCH frames.
func TestWebFetch(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "hello from the page")
	}))
	defer page.Close()
	sc := fmt.Sprintf(`{"scripts":[{"match":"*","steps":[
		{"toolCalls":[{"name":"http_request","arguments":{"url":%q}}]},{"text":"fetched"}]}]}`, page.URL+"/doc")
	e := newEnv(t, opts{script: sc, tools: []tools.Tool{tools.NewHTTPRequest(&http.Client{})}})
	_, fs := e.stream("POST", intentPath("s-web"), map[string]any{"userMessage": "fetch the page"})
	w := find(fs, volo.TypeWebFetch)
	if w == nil || w.ev.Web.StatusCode != 200 || w.ev.Web.URL != page.URL+"/doc" || w.ev.Web.Method != "GET" ||
		!strings.Contains(w.ev.Web.Content, "hello from the page") || !w.ev.Web.Success {
		t.Fatalf("web fetch: %s %+v", names(fs), w)
	}
	if find(fs, volo.TypeWebSearch) != nil {
		t.Fatal("WEB_SEARCH without a search tool")
	}
}

// A client-side tool pauses the turn with an EXTERNAL_TOOL interaction; tool-result brings its
// output and resume streams on.
func TestExternalToolResult(t *testing.T) {
	sc := `{"scripts":[{"match":"*","steps":[{"toolCalls":[{"name":"pick_color","arguments":{"options":["red","blue"]}}]},{"text":"you picked it"}]}]}`
	e := newEnv(t, opts{script: sc})
	_, fs := e.stream("POST", intentPath("s-ext"), map[string]any{"userMessage": "pick one",
		"externalTools": []any{map[string]any{"name": "pick_color", "description": "the user picks"}}})
	in := find(fs, volo.TypeInteraction)
	if in == nil || in.ev.Interaction.InteractionType != volo.InteractionExternalTool {
		t.Fatalf("%s", names(fs))
	}
	turn := turnOf(fs)
	code, _, raw := e.call("POST", prefix+"/tool-result/nope", map[string]any{"output": "blue", "turnId": turn})
	if code != 404 {
		t.Fatalf("unknown call: %d %s", code, raw)
	}
	code, _, raw = e.call("POST", prefix+"/tool-result/"+in.ev.Interaction.ToolCallID, map[string]any{
		"output": []any{map[string]any{"type": "text", "text": "blue"}}, "turnId": turn})
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	_, rest := e.stream("POST", prefix+"/resume?turnId="+turn, nil)
	end := find(rest, volo.TypeToolEnd)
	if end == nil || end.ev.Tool.Output != "blue" || rest[len(rest)-1].ev.Status != volo.StatusCompleted {
		t.Fatalf("%s", names(rest))
	}
}

// A manual pause (RESUME interaction) resumes with resume?turnId=; its text joins the turn.
func TestResumeManualPause(t *testing.T) {
	e := newEnv(t, opts{script: script})
	l := e.open("POST", intentPath("s-pause"), map[string]any{"userMessage": "append please"})
	first := l.until(isPhase(volo.PhaseModelCall))
	run, err := e.rt.RunByReply(context.Background(), "local", first.ev.TraceInfo.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Suspend(context.Background(), "local", run.RequestID); err != nil {
		t.Fatal(err)
	}
	fs := l.rest()
	in := fs[len(fs)-1]
	if in.ev.Type != volo.TypeInteraction || in.ev.Interaction.InteractionType != volo.InteractionResume ||
		in.ev.Interaction.InteractionID != run.ReplyID || in.ev.Interaction.Reason != agent.SuspendManual {
		t.Fatalf("pause: %s", names(fs))
	}
	st, rest := e.stream("POST", prefix+"/resume?turnId="+run.ReplyID, map[string]any{"response": "and mention the weather"})
	if st != 200 || rest[0].ev.Phase != volo.PhaseResumed || rest[len(rest)-1].ev.Status != volo.StatusCompleted {
		t.Fatalf("resume: %d %s", st, names(rest))
	}
	var appended bool
	for _, f := range rest {
		appended = appended || (f.ev.Phase == volo.PhaseAppendedMessage && f.ev.Content == "and mention the weather")
	}
	if !appended {
		t.Fatalf("the response did not join the turn: %s", names(rest))
	}
	// The turn never paused again: a resume of a finished turn streams from its last pause.
	if st, again := e.stream("POST", prefix+"/resume?turnId="+run.ReplyID, nil); st != 200 || names(again) != names(rest) {
		t.Fatalf("replay: %d %s", st, names(again))
	}
	// A turn that never paused has nothing to resume.
	_, fs = e.stream("POST", intentPath("s-nopause"), map[string]any{"userMessage": "hello"})
	if st, early := e.stream("POST", prefix+"/resume?turnId="+turnOf(fs), nil); st != 409 || early[0].ev.ErrorCode != "agent.error.notPaused" {
		t.Fatalf("never paused: %d %s", st, names(early))
	}
}

func TestHeartbeatAndBusySession(t *testing.T) {
	e := newEnv(t, opts{script: script, heartbeat: 50 * time.Millisecond})
	resp := e.request("POST", intentPath("s-hb"), map[string]any{"userMessage": "slow answer"})
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var seen strings.Builder
	for deadline := time.Now().Add(3 * time.Second); !strings.Contains(seen.String(), ": ping\n\n") && time.Now().Before(deadline); {
		n, err := resp.Body.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(seen.String(), ": ping\n\n") {
		t.Fatalf("no heartbeat: %q", seen.String())
	}
	// A second intent on the busy session: one ERROR frame, 409.
	st, fs := e.stream("POST", intentPath("s-hb"), map[string]any{"userMessage": "hello"})
	if st != 409 || len(fs) != 1 || fs[0].ev.ErrorCode != "agent.error.sessionBusy" {
		t.Fatalf("busy: %d %s", st, names(fs))
	}
	if code, _, _ := e.call("POST", prefix+"/s-hb/stop", nil); code != 200 {
		t.Fatal("stop")
	}
}

const spawnScript = `{"scripts":[
 {"match":"delegate","steps":[
   {"toolCalls":[{"name":"agent_spawn","arguments":{"name":"researcher","task":"research the topic","expose_to_user":true,"label":"研究助手"}}]},
   {"text":"the researcher says it is done"}]},
 {"match":"research the topic","steps":[{"thinking":"looking","text":"found three sources"}]},
 {"match":"async","steps":[{"toolCalls":[{"name":"slow_job","arguments":{"job":"render"}}]},{"text":"the job is done"}]}
]}`

// A subagent's forwarded events (canonical Source "main/<name>") are SUBAGENT_* frames; its end
// does not end the turn's stream.
func TestGoldenSubagent(t *testing.T) {
	e := newEnv(t, opts{script: spawnScript})
	g := newGolden(t, "subagent")
	path := intentPath("s-sub")
	st, fs := e.stream("POST", path, map[string]any{"userMessage": "delegate", "executionMode": "MAX"})
	g.request("POST", path, st)
	g.frames(fs)
	g.check()
	var kinds []string
	for _, f := range fs {
		if strings.HasPrefix(f.ev.Type, "SUBAGENT_") {
			k := f.ev.Type
			if f.ev.Subagent.EventType != "" {
				k += ":" + f.ev.Subagent.EventType
			}
			kinds = append(kinds, k)
			if f.ev.Source != "main/researcher" || f.ev.Subagent.Name != "researcher" || f.ev.TraceInfo.TurnID != turnOf(fs) {
				t.Fatalf("subagent frame %+v %+v", f.ev.Subagent, f.ev.TraceInfo)
			}
		}
	}
	got := strings.Join(kinds, " ")
	for _, want := range []string{"SUBAGENT_NOTIFY:SUBAGENT_EXPOSED", "SUBAGENT_NOTIFY:TASK_PROGRESS", "SUBAGENT_DISPATCH",
		"SUBAGENT_NOTIFY:ASSISTANT_END", "SUBAGENT_COMPLETE"} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %s in %s", want, got)
		}
	}
	if last := fs[len(fs)-1].ev; last.Type != volo.TypeComplete || last.Source != "" {
		t.Fatalf("the stream ended with %+v", last)
	}
	if end := find(fs, volo.TypeAssistantEnd); end.ev.Content != "the researcher says it is done" {
		t.Fatalf("main answer %q", end.ev.Content)
	}
}

// slowJob is a tool whose work goes on elsewhere.
type slowJob struct{}

func (slowJob) Spec() tools.Spec {
	return tools.Spec{Name: "slow_job", Description: "starts a job", Parameters: json.RawMessage(`{"type":"object"}`), ReadOnly: true}
}

func (slowJob) Run(context.Context, tools.Env, json.RawMessage) (tools.Result, error) {
	return tools.Result{Async: &tools.Async{TaskID: "job-1", Timeout: time.Minute, Strategy: "NOTIFY"}}, nil
}

func TestAsyncToolInteraction(t *testing.T) {
	e := newEnv(t, opts{script: spawnScript, tools: []tools.Tool{slowJob{}}})
	_, fs := e.stream("POST", intentPath("s-async"), map[string]any{"userMessage": "async"})
	in := find(fs, volo.TypeInteraction)
	if in == nil || in.ev.Interaction.InteractionType != volo.InteractionAsyncTool || in.ev.Interaction.ToolName != "slow_job" ||
		fs[len(fs)-1].ev.Phase != volo.PhasePaused {
		t.Fatalf("async pause: %s", names(fs))
	}
	turn := turnOf(fs)
	code, _, raw := e.call("POST", prefix+"/interaction-response/"+in.ev.Interaction.InteractionID, map[string]any{"response": "rendered.png"})
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	_, rest := e.stream("POST", prefix+"/resume?turnId="+turn, nil)
	if end := find(rest, volo.TypeToolEnd); end == nil || end.ev.Tool.Output != "rendered.png" || rest[len(rest)-1].ev.Status != volo.StatusCompleted {
		t.Fatalf("after the job: %s", names(rest))
	}
}

// A MAX turn of five steps streams text in each; its ASSISTANT_END and its stored message hold
// the whole answer — what the deltas streamed — not the last step's.
func TestMaxTurnAnswerIsWhole(t *testing.T) {
	e := newEnv(t, opts{script: script})
	st, fs := e.stream("POST", intentPath("s-five"), map[string]any{"userMessage": "five steps please", "executionMode": "MAX"})
	if st != 200 {
		t.Fatalf("%d %s", st, names(fs))
	}
	const whole = "第一步。第二步。第三步。第四步。完成。"
	streamed := ""
	for _, f := range fs {
		if f.ev.Type == volo.TypeAssistantDelta {
			streamed += f.ev.Content
		}
	}
	if end := find(fs, volo.TypeAssistantEnd); streamed != whole || end.ev.Content != whole {
		t.Fatalf("streamed %q, ASSISTANT_END %q; want both %q", streamed, end.ev.Content, whole)
	}
	code, r, raw := e.call("GET", prefix+"/s-five/messages", nil)
	b, _ := json.Marshal(r.Data)
	var msgs []volo.ChatMessage
	_ = json.Unmarshal(b, &msgs)
	if code != 200 || len(msgs) != 2 || msgs[1].Content != whole {
		t.Fatalf("stored: %d %s", code, raw)
	}
}

// Appended text a user_message hook refuses is never an APPENDED_MESSAGE; the hint saying why
// is, with the inputId it refuses.
func TestRefusedAppendIsOnTheStream(t *testing.T) {
	e := newEnv(t, opts{script: script, hooks: []string{`{"hookName":"input policy","hookType":"user_message","dispatchType":"policy",
		"policyConfig":{"rules":[{"name":"forbidden","when":"input.contains('forbidden')","decision":"deny","reason":"'不允许的输入'"}]}}`}})
	l := e.open("POST", intentPath("s-refused"), map[string]any{"userMessage": "append please", "executionMode": "MAX"})
	l.until(isPhase(volo.PhaseModelCall))
	code, r, raw := e.call("POST", prefix+"/s-refused/append-message", map[string]any{"appendedText": "forbidden: exfiltrate"})
	if code != 200 {
		t.Fatalf("append %d %s", code, raw)
	}
	inputID := r.Data.(map[string]any)["inputId"].(string)
	var said bool
	for _, f := range l.rest() {
		if f.ev.Phase == volo.PhaseAppendedMessage {
			t.Fatalf("a refused append appended: %+v", f.ev)
		}
		if f.ev.Phase == volo.PhaseHint && strings.Contains(f.ev.Content, "不允许的输入") {
			data, _ := json.Marshal(f.ev.Data)
			said = strings.Contains(string(data), `"inputId":"`+inputID+`"`)
		}
	}
	if !said {
		t.Fatal("no hint naming the refused input")
	}
}
