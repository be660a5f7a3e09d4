package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/model"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

const hitlScript = `{"scripts":[
 {"match":"write","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"original"}}]},
   {"text":"done"}]},
 {"match":"two","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"A"}},{"name":"workspace_write_file","arguments":{"path":"b.txt","content":"B"}}]},
   {"text":"both handled"}]},
 {"match":"external","steps":[
   {"toolCalls":[{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"picked"}]},
 {"match":"budget","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":50}},
   {"text":"after budget","usage":{"inputTokens":100,"outputTokens":50}}]},
 {"match":"supp","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":400},
   {"text":"saw it"}]},
 {"match":"slow","steps":[
   {"text":"first","delayMs":3000},
   {"text":"never"}]},
 {"match":"last word","steps":[
   {"text":"here is the plan","delayMs":400},
   {"text":"night mode added"}]},
 {"match":"steps","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"delayMs":300},
   {"toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"finished"}]}
]}`

// isStatus fails the test unless the run's status is status now: a run that announced a
// state has recorded it (transition.go), so nothing waits for it.
func isStatus(t *testing.T, rt *Runtime, user, requestID, status string) {
	t.Helper()
	if run, err := rt.Run(context.Background(), user, requestID); err != nil || run.Status != status {
		t.Fatalf("run %s: status %q (%v), want %s", requestID, run.Status, err, status)
	}
}

// until reads a run's events from `after` until one of the kinds ks arrives (inclusive).
func (e *env) until(requestID string, after int64, ks ...Kind) []Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ch, err := e.rt.Subscribe(ctx, requestID, after)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []Event
	for ev := range ch {
		out = append(out, ev)
		if slices.Contains(ks, ev.Kind) {
			cancel()
			for range ch { // closed once the follower is closed: it no longer counts as a reader
			}
			return out
		}
	}
	e.t.Fatalf("no %v in run %s: %s", ks, requestID, kinds(out))
	return nil
}

func (e *env) start(user, session, input string) RunInfo {
	e.t.Helper()
	info, err := e.rt.StartRun(context.Background(), StartRequest{UserID: user, SessionKey: session, Input: input})
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

func TestAskApproveWithEditAndRule(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, hitlScript, Config{DefaultBehavior: BehaviorAsk})
		info := e.start("alice", "s1", "write")
		evs := e.until(info.RequestID, 0, KindSuspended)
		ask := find(evs, KindAsk)
		if ask == nil || len(ask.Ask.Calls) != 1 {
			t.Fatalf("no ask: %s", kinds(evs))
		}
		call := ask.Ask.Calls[0]
		if call.Name != "workspace_write_file" || !strings.Contains(call.Arguments, "original") || call.AskID == "" || call.RuleDescription == "" {
			t.Fatalf("ask %+v", call)
		}
		if s := evs[len(evs)-1].Suspend; s.Reason != SuspendPermissionAsk || len(s.PendingCalls) != 1 || s.PendingCalls[0].State != "asking" {
			t.Fatalf("suspend %+v", s)
		}
		isStatus(t, e.rt, "alice", info.RequestID, storage.RunSuspended)

		// Refused: another user, other arguments, an unknown ask.
		ans := Answer{AskID: call.AskID, Approved: true}
		if err := e.rt.Answer(context.Background(), "mallory", info.RequestID, []Answer{ans}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("other user: %v", err)
		}
		other := ans
		other.Arguments = json.RawMessage(`{"path":"a.txt","content":"something else"}`)
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{other}); !errors.Is(err, ErrArgumentsChanged) {
			t.Fatalf("other arguments: %v", err)
		}
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{{AskID: "ask_nope", Approved: true}}); !errors.Is(err, ErrNotWaiting) {
			t.Fatalf("unknown ask: %v", err)
		}
		// Refused whole, nothing of it kept: one ask answered twice in a request, a known answer
		// beside an unknown one. Kept in part, the run waited for good.
		for _, batch := range [][]Answer{
			{{AskID: call.AskID, Approved: false}, {AskID: call.AskID, Approved: true}},
			{{AskID: call.AskID, Approved: false}, {AskID: "ask_nope", Approved: true}},
		} {
			if err := e.rt.Answer(context.Background(), "alice", info.RequestID, batch); err == nil {
				t.Fatalf("%+v: taken", batch)
			}
			rec, err := db.GetRun(context.Background(), info.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if asks, _ := db.RunAsks(context.Background(), rec.ID, storage.AskPending); len(asks) != 1 {
				t.Fatalf("%+v: the ask was answered by a refused request (%d pending)", batch, len(asks))
			}
		}

		// Approve with edited input (same arguments as shown, key order aside) and a rule.
		ans.Arguments = json.RawMessage(`{"content":"original","path":"a.txt"}`)
		ans.Input = json.RawMessage(`{"path":"a.txt","content":"edited by alice"}`)
		ans.Rules = []RuleSpec{{ToolName: "workspace_write_file", RuleContent: "a.txt", Behavior: BehaviorAllow}}
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{ans}); err != nil {
			t.Fatal(err)
		}
		// The same answer again (a client's resend) changes nothing; another is refused.
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{ans}); err != nil {
			t.Fatalf("the same answer again: %v", err)
		}
		other = ans
		other.Input = json.RawMessage(`{"path":"a.txt","content":"edited again"}`)
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{other}); !errors.Is(err, ErrAlreadyAnswered) && !errors.Is(err, ErrNotWaiting) {
			t.Fatalf("second use: %v", err)
		}
		other = ans
		other.Rules = nil
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{other}); !errors.Is(err, ErrAlreadyAnswered) && !errors.Is(err, ErrNotWaiting) {
			t.Fatalf("second use without the rules: %v", err)
		}
		rest := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
		checkSeqs(t, rest, evs[len(evs)-1].Seq)
		res := find(rest, KindAskResolved)
		if res == nil || !res.Answers[0].Approved || res.Answers[0].Input == "" {
			t.Fatalf("resolved: %s", kinds(rest))
		}
		if te := find(rest, KindToolResultEnded).Tool; te.State != ToolSuccess || !strings.Contains(te.Arguments, "edited by alice") {
			t.Fatalf("tool ran with %+v", te)
		}
		dir, _ := e.rt.ws.Dir(info.SessionID)
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "edited by alice" {
			t.Fatalf("file holds %q", b)
		}
		if rest[len(rest)-1].End.Outcome != OutcomeCompleted {
			t.Fatalf("end %+v", rest[len(rest)-1].End)
		}
		// The remembered rule skips the ask next time in this session.
		info2, evs2 := e.run(StartRequest{UserID: "alice", SessionKey: "s1", Input: "write"})
		if find(evs2, KindAsk) != nil || evs2[len(evs2)-1].End.Outcome != OutcomeCompleted {
			t.Fatalf("asked again: %s", kinds(evs2))
		}
		// But not in another session.
		info3 := e.start("alice", "s2", "write")
		if find(e.until(info3.RequestID, 0, KindSuspended), KindAsk) == nil {
			t.Fatal("rule leaked into another session")
		}
		_ = info2
		if err := e.rt.Stop(context.Background(), "alice", info3.RequestID); err != nil {
			t.Fatal(err)
		}
		end := e.until(info3.RequestID, 0, KindRunEnded)
		if end[len(end)-1].End.Outcome != OutcomeInterrupted {
			t.Fatalf("stopping a suspended run: %+v", end[len(end)-1].End)
		}
	})
}

func TestAskDenyTimeoutAndAllDenied(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{DefaultBehavior: BehaviorAsk, AskTimeout: 300 * time.Millisecond, SweepEvery: 50 * time.Millisecond})
	// Two asks: one denied by the user, one left to time out: every call denied.
	info := e.start("u", "s", "two")
	evs := e.until(info.RequestID, 0, KindSuspended)
	calls := find(evs, KindAsk).Ask.Calls
	if len(calls) != 2 {
		t.Fatalf("asks: %+v", calls)
	}
	if err := e.rt.Answer(context.Background(), "u", info.RequestID, []Answer{{CallID: calls[0].CallID, Approved: false, Reason: "不需要"}}); err != nil {
		t.Fatal(err)
	}
	rest := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	res := find(rest, KindAskResolved).Answers
	if len(res) != 2 || res[0].Approved || res[0].Reason != "不需要" || res[1].Approved || res[1].Reason != "等待超时" {
		t.Fatalf("answers %+v", res)
	}
	var states []string
	for _, ev := range rest {
		if ev.Kind == KindToolResultEnded {
			states = append(states, ev.Tool.State+":"+ev.Tool.Error)
		}
	}
	if strings.Join(states, ",") != "denied:不需要,denied:等待超时" {
		t.Fatalf("states %v", states)
	}
	if ad := find(rest, KindAllDenied); ad == nil || len(ad.Calls) != 2 {
		t.Fatalf("all denied: %s", kinds(rest))
	}
	if r := find(rest, KindResult).Result; r.Text != "both handled" {
		t.Fatalf("the model was not told and asked again: %+v", r)
	}
}

func TestExternalExecution(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	info, err := e.rt.StartRun(context.Background(), StartRequest{UserID: "u", SessionKey: "s", Input: "external",
		ExternalTools: []model.ToolSpec{{Name: "client_pick", Description: "the user picks", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	evs := e.until(info.RequestID, 0, KindSuspended)
	ext := find(evs, KindExternalCalls)
	if ext == nil || ext.Calls[0].Name != "client_pick" || evs[len(evs)-1].Suspend.Reason != SuspendExternalExecution {
		t.Fatalf("external: %s", kinds(evs))
	}
	if err := e.rt.SubmitToolResults(context.Background(), "u", info.RequestID, []ToolOutput{{CallID: "nope", Output: "x"}}); !errors.Is(err, ErrNotWaiting) {
		t.Fatalf("unknown call: %v", err)
	}
	if err := e.rt.SubmitToolResults(context.Background(), "u", info.RequestID, []ToolOutput{{CallID: ext.Calls[0].CallID, Output: "B"}}); err != nil {
		t.Fatal(err)
	}
	rest := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	if r := find(rest, KindExternalResults); r == nil || r.Results[0].Output != "B" || r.Results[0].Name != "client_pick" {
		t.Fatalf("results: %s", kinds(rest))
	}
	if r := find(rest, KindResult).Result; r.Text != "picked" {
		t.Fatalf("result %+v", r)
	}
	hist, _ := e.rt.history(context.Background(), info.SessionID, -1)
	if tool := hist[2]; tool.Role != model.RoleTool || tool.Text != "B" {
		t.Fatalf("the model saw %+v", tool)
	}
}

// A client-side call's output is its execution's result: the post_tool_use hooks see it as they
// see a server tool's (nothing was sent for it, so an auditor never learned what the client ran
// nor what it returned to the model).
func TestExternalResultReachesPostToolUse(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	const secret = "hook-secret"
	audit := newReceiver(t, secret, nil)
	e.hook(`{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"` + audit.srv.URL + `","signingSecret":"` + secret + `"}}`)
	info, err := e.rt.StartRun(context.Background(), StartRequest{UserID: "u", SessionKey: "s", Input: "external",
		ExternalTools: []model.ToolSpec{{Name: "client_pick", Description: "the user picks", Parameters: json.RawMessage(`{"type":"object"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	evs := e.until(info.RequestID, 0, KindSuspended)
	call := find(evs, KindExternalCalls).Calls[0]
	if err := e.rt.SubmitToolResults(context.Background(), "u", info.RequestID, []ToolOutput{{CallID: call.CallID, Output: "B"}}); err != nil {
		t.Fatal(err)
	}
	e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	var pt dispatcher.PostToolUseContext
	if err := json.Unmarshal(audit.wait(t, dispatcher.PostToolUse, 1)[0], &pt); err != nil {
		t.Fatal(err)
	}
	if pt.ToolName != "client_pick" || pt.ToolCallID != call.CallID || !pt.Succeeded || string(pt.Output) != "B" || pt.ErrorMessage != nil {
		t.Fatalf("post_tool_use %+v (output %s)", pt, pt.Output)
	}
}

func TestTokenBudgetStopsAndResumes(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{TokenBudget: 120})
	info := e.start("u", "s", "budget")
	evs := e.until(info.RequestID, 0, KindSuspended)
	st := find(evs, KindStopRequested)
	if st == nil || st.Stop.GenerateReason != ReasonMiddleware || !strings.Contains(st.Stop.Reason, "120") {
		t.Fatalf("stop: %s", kinds(evs))
	}
	if evs[len(evs)-1].Suspend.Reason != SuspendRequestStop {
		t.Fatalf("suspend %+v", evs[len(evs)-1].Suspend)
	}
	if err := e.rt.Resume(context.Background(), "other", info.RequestID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other user resumed: %v", err)
	}
	if err := e.rt.Resume(context.Background(), "u", info.RequestID); err != nil {
		t.Fatal(err)
	}
	rest := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	if find(rest, KindResumed) == nil || find(rest, KindResult).Result.Text != "after budget" {
		t.Fatalf("after resume: %s", kinds(rest))
	}
}

func TestSupplementaryInput(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	info := e.start("u", "s", "supp")
	e.until(info.RequestID, 0, KindModelStarted)
	id, err := e.rt.AppendInput(context.Background(), "u", info.RequestID, "顺便再加一个夜间模式")
	if err != nil {
		t.Fatal(err)
	}
	evs := e.until(info.RequestID, 0, KindRunEnded)
	in := find(evs, KindInputConsumed)
	if in == nil || in.Input.InputID != id || in.Input.Content != "顺便再加一个夜间模式" || in.Input.AssistantMessageID == info.AssistantMessageID {
		t.Fatalf("consumed: %s", kinds(evs))
	}
	if h := find(evs, KindHint); h == nil || h.Seq != in.Seq+1 || h.Block.Text != "顺便再加一个夜间模式" || *h.Block.HintSource != "u" {
		t.Fatalf("the input as a hint: %s", kinds(evs))
	}
	if r := find(evs, KindResult).Result; r.MessageID != in.Input.AssistantMessageID {
		t.Fatalf("answer went to message %d", r.MessageID)
	}
	h, _ := e.rt.History(context.Background(), info.SessionID, time.Time{})
	if len(h) != 4 || h[2].Text != "顺便再加一个夜间模式" || h[3].Text != "saw it" {
		t.Fatalf("history %+v", h)
	}
	if _, err := e.rt.AppendInput(context.Background(), "u", info.RequestID, "late"); !errors.Is(err, ErrNotLive) {
		t.Fatalf("append to an ended run: %v", err)
	}
}

// Input appended while the model gives what would be its last answer is not dropped with the
// run's end: the hooks are asked about it, and the model answers it in a step of its own.
func TestInputDuringTheLastAnswer(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	info := e.start("u", "s", "last word")
	e.until(info.RequestID, 0, KindModelStarted)
	id, err := e.rt.AppendInput(context.Background(), "u", info.RequestID, "also add a night mode")
	if err != nil {
		t.Fatal(err)
	}
	evs := e.until(info.RequestID, 0, KindRunEnded)
	in := find(evs, KindInputConsumed)
	if in == nil || in.Input.InputID != id {
		t.Fatalf("the input was not taken: %s", kinds(evs))
	}
	if r := find(evs, KindResult).Result; r.Text != "night mode added" || r.MessageID != in.Input.AssistantMessageID {
		t.Fatalf("the answer %+v; want the model's answer to the input, in its message", r)
	}
	h, _ := e.rt.History(context.Background(), info.SessionID, time.Time{})
	if len(h) != 4 || h[1].Text != "here is the plan" || h[2].Text != "also add a night mode" || h[3].Text != "night mode added" {
		t.Fatalf("history %+v", h)
	}
}

// TestEditedArgumentsReconsidered: arguments a person edits while approving face the hooks
// again; a hook's ask on them goes back to a person with those arguments (approved as they
// are, they run), and a deny stops the call.
func TestEditedArgumentsReconsidered(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{DefaultBehavior: BehaviorAsk})
	e.hook(`{"hookName":"write policy","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file","dispatchType":"policy",
		"policyConfig":{"rules":[
		{"name":"forbidden","when":"args.content.contains('forbidden')","decision":"deny","reason":"'no forbidden writes'"},
		{"name":"secret","when":"args.content.contains('secret')","decision":"ask","reason":"'secrets need review'"}]}}`)
	dir := func(info RunInfo) string { d, _ := e.rt.ws.Dir(info.SessionID); return d }
	approve := func(info RunInfo, after int64, call AskCall, input string) []Event {
		t.Helper()
		ans := Answer{AskID: call.AskID, Approved: true, Arguments: json.RawMessage(call.Arguments)}
		if input != "" {
			ans.Input = json.RawMessage(input)
		}
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{ans}); err != nil {
			t.Fatal(err)
		}
		return e.until(info.RequestID, after, KindSuspended, KindRunEnded)
	}

	info := e.start("alice", "s1", "write")
	evs := e.until(info.RequestID, 0, KindSuspended)
	first := find(evs, KindAsk).Ask.Calls[0]
	rest := approve(info, evs[len(evs)-1].Seq, first, `{"path":"a.txt","content":"a secret"}`)
	again := find(rest, KindAsk)
	if again == nil || !strings.Contains(again.Ask.Calls[0].Arguments, "a secret") || again.Ask.Calls[0].RuleDescription != "secrets need review" {
		t.Fatalf("the edited call was not asked again: %s", kinds(rest))
	}
	if _, err := os.Stat(filepath.Join(dir(info), "a.txt")); err == nil {
		t.Fatal("the edited call ran before its second approval")
	}
	end := approve(info, rest[len(rest)-1].Seq, again.Ask.Calls[0], "")
	if b, _ := os.ReadFile(filepath.Join(dir(info), "a.txt")); string(b) != "a secret" || end[len(end)-1].Kind != KindRunEnded {
		t.Fatalf("approved as asked, the call did not run: %q %s", b, kinds(end))
	}

	info = e.start("alice", "s2", "write")
	evs = e.until(info.RequestID, 0, KindSuspended)
	end = approve(info, evs[len(evs)-1].Seq, find(evs, KindAsk).Ask.Calls[0], `{"path":"a.txt","content":"forbidden"}`)
	if te := find(end, KindToolResultEnded).Tool; te.State != ToolDenied || !strings.Contains(te.Error, "no forbidden writes") {
		t.Fatalf("denied edit: %+v", te)
	}
	if _, err := os.Stat(filepath.Join(dir(info), "a.txt")); err == nil {
		t.Fatal("a denied edit was written")
	}
}

// TestAnswersOnTheDecisionLog: a person's answer to a hook's ask is on the decision log beside
// the chain's ask, under its decisionId, as what took effect: an approval (as reviewer or user)
// with the arguments approved, a refusal, an ask nobody answered in time.
func TestAnswersOnTheDecisionLog(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{AskTimeout: 300 * time.Millisecond, SweepEvery: 50 * time.Millisecond})
	e.hook(`{"hookName":"review writes","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file","dispatchType":"policy",
		"policyConfig":{"rules":[{"name":"all","when":"true","decision":"ask","reason":"'a person reviews writes'"}]}}`)
	answer := func(session string, ans func(AskCall) Answer) RunInfo {
		t.Helper()
		info := e.start("alice", session, "write")
		evs := e.until(info.RequestID, 0, KindSuspended)
		if ans != nil {
			if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{ans(find(evs, KindAsk).Ask.Calls[0])}); err != nil {
				t.Fatal(err)
			}
		}
		e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
		return info
	}
	edited := `{"path":"a.txt","content":"edited"}`
	cases := []struct {
		name    string
		ans     func(AskCall) Answer
		hook    string
		outcome string
		args    string
	}{
		{"approved, edited", func(c AskCall) Answer {
			return Answer{AskID: c.AskID, Approved: true, Input: json.RawMessage(edited), AnsweredBy: "reviewer:rev-1"}
		}, "person:reviewer:rev-1", "allow", edited},
		{"refused", func(c AskCall) Answer { return Answer{AskID: c.AskID, Reason: "not now"} }, "person", "deny", ""},
		{"timed out", nil, "ask-timeout", "deny", ""},
	}
	for i, c := range cases {
		rows := e.sessionDecisions(t, answer(fmt.Sprintf("s%d", i), c.ans))
		var answered *storage.Decision // the answer to the first chain's ask
		for j := range rows {
			if j > 0 && rows[j].DecisionID == rows[0].DecisionID && rows[j].HookID == 0 {
				answered = &rows[j]
			}
		}
		if rows[0].Outcome != "ask" || answered == nil || answered.HookName != c.hook || answered.Outcome != c.outcome ||
			answered.ToolName != "workspace_write_file" {
			t.Fatalf("%s: rows %+v", c.name, rows)
		}
		if c.args != "" && answered.SubjectHash != argsSHA(c.args) {
			t.Fatalf("%s: the answer's row hashes other arguments than those approved", c.name)
		}
	}
}

// TestPermissionAskAnswersOnTheDecisionLog: a person's answer to an ask a permission rule made
// (no hook asked) is on the decision log too: alone under a decisionId of its own when no hook
// ran, else beside the rows of the chain that let the call on. A person's refusal of a call the
// hooks allowed was missing from the log, which showed only the hooks' allow.
func TestPermissionAskAnswersOnTheDecisionLog(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{DefaultBehavior: BehaviorAsk})
	run := func(session string, approved bool) []storage.Decision {
		t.Helper()
		info := e.start("alice", session, "write")
		evs := e.until(info.RequestID, 0, KindSuspended)
		call := find(evs, KindAsk).Ask.Calls[0]
		if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{{AskID: call.AskID, Approved: approved, Reason: "checked"}}); err != nil {
			t.Fatal(err)
		}
		e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
		return e.sessionDecisions(t, info)
	}
	rows := run("no hook", false)
	if len(rows) != 1 || rows[0].HookID != 0 || rows[0].HookName != "person" || rows[0].Outcome != "deny" ||
		rows[0].Reason != "checked" || rows[0].ToolName != "workspace_write_file" || rows[0].DecisionID == "" || rows[0].ToolCallID == "" {
		t.Fatalf("a refusal of a rule's ask, no hook: %+v", rows)
	}
	e.hook(`{"hookName":"log writes","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file","dispatchType":"policy",
		"policyConfig":{"rules":[{"name":"all","when":"true","decision":"allow"}]}}`)
	for _, approved := range []bool{false, true} {
		rows := run(fmt.Sprint("hook ", approved), approved)
		want := map[bool]string{false: "deny", true: "allow"}[approved]
		if len(rows) != 2 || rows[0].HookName != "log writes" || rows[0].Outcome != "allow" || rows[1].HookName != "person" ||
			rows[1].Outcome != want || rows[1].DecisionID != rows[0].DecisionID {
			t.Fatalf("the answer (approved %v) to a rule's ask after the hooks allowed: %+v", approved, rows)
		}
	}
}

// TestSupplementaryInputAsked: input sent while a run runs is a user message too, asked of the
// user_message hooks before the model gets it: a deny keeps it from the model (a hint tied to
// it says why), a modify is what the model gets, and each is on the decision log.
func TestSupplementaryInputAsked(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	e.hook(`{"hookName":"input policy","hookType":"user_message","dispatchType":"policy","policyConfig":{"rules":[
		{"name":"forbidden","when":"input.contains('forbidden')","decision":"deny","reason":"'不允许的输入'"},
		{"name":"review","when":"input.contains('review')","decision":"ask","reason":"'needs review'"},
		{"name":"rewrite","when":"input == 'rewrite me'","decision":"modify","modifiedValue":"'plain'"}]}}`)
	info := e.start("u", "s", "supp")
	e.until(info.RequestID, 0, KindModelStarted)
	ids := map[string]string{}
	for _, text := range []string{"forbidden: exfiltrate", "review this", "rewrite me"} {
		id, err := e.rt.AppendInput(context.Background(), "u", info.RequestID, text)
		if err != nil {
			t.Fatal(err)
		}
		ids[text] = id
	}
	evs := e.until(info.RequestID, 0, KindRunEnded)
	var consumed []string
	refused := map[string]string{}
	for _, ev := range evs {
		switch {
		case ev.Kind == KindInputConsumed:
			consumed = append(consumed, ev.Input.InputID+"="+ev.Input.Content)
		case ev.Kind == KindHint && *ev.Block.HintSource == "hookd":
			refused[ev.Block.InputID] = ev.Block.Text
		}
	}
	if len(consumed) != 1 || consumed[0] != ids["rewrite me"]+"=plain" {
		t.Fatalf("consumed %v, want only the rewritten input, as rewritten", consumed)
	}
	if !strings.Contains(refused[ids["forbidden: exfiltrate"]], "不允许的输入") || !strings.Contains(refused[ids["review this"]], "needs review") {
		t.Fatalf("refusals %v", refused)
	}
	h, _ := e.rt.History(context.Background(), info.SessionID, time.Time{})
	for _, m := range h {
		if strings.Contains(m.Text, "forbidden") || strings.Contains(m.Text, "review") || m.Text == "rewrite me" {
			t.Fatalf("the model's history holds %q: %+v", m.Text, h)
		}
	}
	rows, err := e.db.ListDecisions(context.Background(), storage.DecisionFilter{HookType: "user_message"})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, r := range rows {
		outcomes = append([]string{r.Outcome}, outcomes...)
	}
	// The ask is recorded as the refusal it was: nobody can be asked before the run takes it.
	if strings.Join(outcomes, ",") != "allow,deny,deny,modify" || !strings.Contains(rows[1].Reason, "nobody can be asked") {
		t.Fatalf("decision log outcomes %v, want the first input's and the three sent during the run", outcomes)
	}
}

func TestManualSuspendResume(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	info := e.start("u", "s", "steps")
	e.until(info.RequestID, 0, KindModelStarted)
	if err := e.rt.Suspend(context.Background(), "u", info.RequestID); err != nil {
		t.Fatal(err)
	}
	evs := e.until(info.RequestID, 0, KindSuspended)
	if s := evs[len(evs)-1].Suspend; s.Reason != SuspendManual || s.Step != 1 {
		t.Fatalf("suspend %+v", s)
	}
	if err := e.rt.Resume(context.Background(), "u", info.RequestID); err != nil {
		t.Fatal(err)
	}
	rest := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	if find(rest, KindResult).Result.Text != "finished" {
		t.Fatalf("after resume: %s", kinds(rest))
	}
}

// A shutdown suspends a running run; a new runtime on the same database resumes it under the
// same run id, and the event stream has neither gaps nor repeats.
func TestShutdownSuspendsAndRestartResumes(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, hitlScript, Config{})
		info := e.start("u", "s", "slow")
		e.until(info.RequestID, 0, KindModelStarted)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.rt.Shutdown(ctx)
		cancel()
		run, _ := e.rt.Run(context.Background(), "u", info.RequestID)
		if run.Status != storage.RunSuspended {
			t.Fatalf("after shutdown: %s", run.Status)
		}

		rt2 := New(db, e.disp, e.rt.model, e.rt.tools, e.rt.ws, quiet(), Config{})
		if err := rt2.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer rt2.Shutdown(context.Background())
		if err := rt2.Resume(context.Background(), "u", info.RequestID); err != nil {
			t.Fatal(err)
		}
		e2 := &env{t: t, db: db, rt: rt2}
		all := e2.until(info.RequestID, 0, KindRunEnded)
		checkSeqs(t, all, 0)
		susp := find(all, KindSuspended)
		if susp == nil || susp.Suspend.Reason != SuspendShutdown {
			t.Fatalf("events: %s", kinds(all))
		}
		if r := find(all, KindResult).Result; r.Text != "first" {
			t.Fatalf("the interrupted model call was not made again: %+v", r)
		}
		if all[len(all)-1].End.Outcome != OutcomeCompleted || all[len(all)-1].RunID != info.RequestID {
			t.Fatalf("end %+v", all[len(all)-1])
		}
	})
}

// An answer kept just before a crash, the run's resume lost with the process: a new runtime on
// the same database goes on with the run, which waits for nobody; a pause for a person still
// waits.
func TestAnsweredBeforeACrashGoesOn(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, hitlScript, Config{DefaultBehavior: BehaviorAsk})
		answered := e.start("u", "s1", "write")
		waiting := e.start("u", "s2", "write")
		var asks [2]*Event
		for i, id := range []string{answered.RequestID, waiting.RequestID} {
			asks[i] = find(e.until(id, 0, KindSuspended), KindAsk)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.rt.Shutdown(ctx)
		cancel()
		// What Answer keeps before it resumes the run.
		body := mustJSON(Answer{AskID: asks[0].Ask.Calls[0].AskID, Approved: true})
		if err := db.AnswerAsk(context.Background(), asks[0].Ask.Calls[0].AskID, storage.AskApproved, body); err != nil {
			t.Fatal(err)
		}

		rt2 := New(db, e.disp, e.rt.model, e.rt.tools, e.rt.ws, quiet(), Config{DefaultBehavior: BehaviorAsk})
		if err := rt2.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer rt2.Shutdown(context.Background())
		e2 := &env{t: t, db: db, rt: rt2}
		if all := e2.until(answered.RequestID, 0, KindRunEnded); all[len(all)-1].End.Outcome != OutcomeCompleted {
			t.Fatalf("the answered run: %s", kinds(all))
		}
		isStatus(t, rt2, "u", waiting.RequestID, storage.RunSuspended)
	})
}

// A client may act on a pause the moment it sees it: a resume sent from another goroutine as
// soon as the suspended event arrives always finds the run suspended. 1,000 pauses of one run,
// each resumed at once (100 under the race detector).
func TestResumeRightAfterSuspend(t *testing.T) {
	pauses := 1000
	if raceEnabled {
		pauses = 100
	}
	var steps []string
	for range pauses {
		steps = append(steps, `{"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":50}}`)
	}
	steps = append(steps, `{"text":"done"}`)
	script := `{"scripts":[{"match":"loop","steps":[` + strings.Join(steps, ",") + `]}]}`
	e := newEnv(t, storagetest.SQLite(t), script, Config{TokenBudget: 100, MaxIters: pauses + 1})
	info := e.start("u", "s", "loop")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ch, err := e.rt.Subscribe(ctx, info.RequestID, 0)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, pauses)
	n := 0
	var last Event
	for ev := range ch {
		last = ev
		if ev.Kind == KindSuspended {
			n++
			go func() { errs <- e.rt.Resume(context.Background(), "u", info.RequestID) }()
		}
	}
	if last.Kind != KindRunEnded || last.End.Outcome != OutcomeCompleted {
		t.Fatalf("the run did not complete: last event %s", last.Kind)
	}
	if n != pauses {
		t.Fatalf("%d pauses, want %d", n, pauses)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("resume right after the pause: %v", err)
		}
	}
}

// An ask keeps the call it is about: a client shows its tool and arguments from the ask alone.
func TestAskKeepsItsCall(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e, info, evs := pausedRun(t, db)
		call := find(evs, KindAsk).Ask.Calls[0]
		asks, err := e.rt.Asks(context.Background(), "alice", info.RequestID, AskPending)
		if err != nil || len(asks) != 1 {
			t.Fatalf("asks %+v, %v", asks, err)
		}
		a := asks[0]
		if a.AskID != call.AskID || a.ToolName != "workspace_write_file" || a.Arguments != call.Arguments ||
			a.ArgsHash != argsHash(call.Arguments) || a.RequestID != info.RequestID || a.Kind != AskConfirm {
			t.Fatalf("ask %+v, want the call %+v", a, call)
		}
		if got, err := e.rt.Ask(context.Background(), call.AskID); err != nil || got != a {
			t.Fatalf("Ask = %+v, %v", got, err)
		}
		if _, err := e.rt.Asks(context.Background(), "bob", info.RequestID, ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another user's asks: %v", err)
		}
	})
}

// A run whose saved state cannot be read is refused loudly, naming it, rather than resumed from
// a zero state.
func TestUnreadableStateFailsLoudly(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	info := e.start("u", "s", "steps")
	e.until(info.RequestID, 0, KindModelStarted)
	if err := e.rt.Suspend(context.Background(), "u", info.RequestID); err != nil {
		t.Fatal(err)
	}
	e.until(info.RequestID, 0, KindSuspended)
	rec, err := e.rt.ownRun(context.Background(), "u", info.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	rec.State = []byte(`{"step":"not a number"`)
	if err := e.db.UpdateRun(context.Background(), &rec); err != nil {
		t.Fatal(err)
	}
	err = e.rt.Resume(context.Background(), "u", info.RequestID)
	if !errors.Is(err, ErrBadState) || !strings.Contains(err.Error(), info.RequestID) {
		t.Fatalf("resume of an unreadable run: %v; want ErrBadState naming %s", err, info.RequestID)
	}
	isStatus(t, e.rt, "u", info.RequestID, storage.RunSuspended)
}

// The deny rules a person gives with a refusal are stored (and only those: a refusal allows
// nothing).
func TestRefusalStoresDenyRules(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e, info, evs := pausedRun(t, db)
		call := find(evs, KindAsk).Ask.Calls[0]
		err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{{AskID: call.AskID, Approved: false,
			Rules: []RuleSpec{{ToolName: "workspace_write_file", RuleContent: "a.txt", Behavior: BehaviorDeny},
				{ToolName: "workspace_write_file", RuleContent: "b.txt", Behavior: BehaviorAllow}}}})
		if err != nil {
			t.Fatal(err)
		}
		e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
		run, err := e.rt.ownRun(context.Background(), "alice", info.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := db.RulesFor(context.Background(), run.SessionID, "alice", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) != 1 || rules[0].Behavior != BehaviorDeny || rules[0].RuleContent != "a.txt" {
			t.Fatalf("rules after the refusal: %+v", rules)
		}
	})
}

// argsSHA is the decision log's hash of tool arguments: SHA-256 of their canonical JSON.
func argsSHA(args string) string {
	var v any
	json.Unmarshal([]byte(args), &v)
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestEditedApprovalRefusedOnTheLog: an approval whose edited arguments a permission rule then
// denies is recorded as the refusal that took effect, not as an allow.
func TestEditedApprovalRefusedOnTheLog(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{})
	e.hook(`{"hookName":"review writes","hookType":"pre_tool_use","toolNameMatch":"workspace_write_file","dispatchType":"policy",
		"policyConfig":{"rules":[{"name":"all","when":"true","decision":"ask","reason":"'a person reviews writes'"}]}}`)
	if err := e.db.AddRules(context.Background(), []*storage.PermissionRule{{ToolName: "workspace_write_file", RuleContent: "b.txt",
		Behavior: BehaviorDeny, Source: "admin", Scope: "global"}}); err != nil {
		t.Fatal(err)
	}
	info := e.start("alice", "s1", "write")
	evs := e.until(info.RequestID, 0, KindSuspended)
	call := find(evs, KindAsk).Ask.Calls[0]
	ans := Answer{AskID: call.AskID, Approved: true, Input: json.RawMessage(`{"path":"b.txt","content":"x"}`)}
	if err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{ans}); err != nil {
		t.Fatal(err)
	}
	end := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
	if te := find(end, KindToolResultEnded).Tool; te.State != ToolDenied {
		t.Fatalf("the edited call: %+v", te)
	}
	sid := info.SessionID
	rows, _ := e.db.ListDecisions(context.Background(), storage.DecisionFilter{SessionID: &sid})
	for _, r := range rows {
		if r.HookName == "person" && (r.Outcome != "deny" || !strings.Contains(r.Reason, "then refused")) {
			t.Fatalf("the person's row: %s %q", r.Outcome, r.Reason)
		}
	}
	if n := len(rows); n < 3 {
		t.Fatalf("%d rows, want the ask, the person's answer, the second chain", n)
	}
}

// TestDeniedInputStaysOutOfHistory: a first input a user_message hook denied is kept from the
// model of the session's later runs too, as one stopped before its hooks decided would be; an
// admitted one is the conversation.
func TestDeniedInputStaysOutOfHistory(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, `{"scripts":[{"match":"*","steps":[{"text":"ok"}]}]}`, Config{})
		e.hook(`{"hookName":"dlp","hookType":"user_message","dispatchType":"policy","policyConfig":{"rules":[
			{"name":"cards","when":"input.contains('4111')","decision":"deny","reason":"'no card numbers'"}]}}`)
		denied := e.start("u", "s", "my card is 4111 1111")
		if evs := e.until(denied.RequestID, 0, KindRunEnded); evs[len(evs)-1].End.ErrorCode != CodeHookDenied {
			t.Fatalf("the denied run ended %+v", evs[len(evs)-1].End)
		}
		next := e.start("u", "s", "hello")
		e.until(next.RequestID, 0, KindRunEnded)
		h, err := e.rt.history(context.Background(), next.SessionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, m := range h {
			texts = append(texts, m.Text)
		}
		if len(texts) != 2 || texts[0] != "hello" || texts[1] != "ok" {
			t.Fatalf("the model's history of the session: %q", texts)
		}
	})
}

// sessionDecisions is the decision log of info's session, oldest first.
func (e *env) sessionDecisions(t *testing.T, info RunInfo) []storage.Decision {
	t.Helper()
	sid := info.SessionID
	rows, err := e.db.ListDecisions(context.Background(), storage.DecisionFilter{SessionID: &sid})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(rows)
	return rows
}

// A rule given with an answer is checked whole before anything of the reply is kept: a tool name
// that no call could parse was stored, and made every later call of the session ask.
func TestAnswerWithAnUnparseableRuleKeepsNothing(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e, info, evs := pausedRun(t, db)
		call := find(evs, KindAsk).Ask.Calls[0]
		for _, r := range []RuleSpec{
			{ToolName: "/(bad/", RuleContent: "*", Behavior: BehaviorDeny},
			{ToolName: "workspace_write_file||shell", RuleContent: "*", Behavior: BehaviorDeny},
			{ToolName: strings.Repeat("x", 64<<10+1), RuleContent: "*", Behavior: BehaviorDeny},
		} {
			err := e.rt.Answer(context.Background(), "alice", info.RequestID, []Answer{{AskID: call.AskID, Approved: true,
				Rules: []RuleSpec{{ToolName: "workspace_write_file", RuleContent: "a.txt", Behavior: BehaviorAllow}, r}}})
			re, ok := errors.AsType[*RuleError](err)
			if !ok || re.Index != 1 || re.Field != RuleToolName || !strings.Contains(err.Error(), "rules[1].tool_name") {
				t.Fatalf("an answer with tool_name %.20q: %v, want a RuleError naming rules[1].tool_name", r.ToolName, err)
			}
		}
		pending, err := e.rt.Asks(context.Background(), "alice", info.RequestID, AskPending)
		if err != nil || len(pending) != 1 {
			t.Fatalf("pending asks after the refused answers: %v %v", pending, err)
		}
		run, err := e.rt.ownRun(context.Background(), "alice", info.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if rules, err := db.RulesFor(context.Background(), run.SessionID, "alice", time.Now()); err != nil || len(rules) != 0 {
			t.Fatalf("rules after the refused answers: %+v %v", rules, err)
		}
	})
}

// A stored rule that cannot be parsed is not skipped: skipped, a deny rule let the call it was
// written for run. The call is asked about (as when the rules cannot be read), naming the rule.
func TestUnparseableStoredRuleAsks(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), hitlScript, Config{DefaultBehavior: BehaviorAllow})
	bad := &storage.PermissionRule{ToolName: "/(workspace_write_file/", RuleContent: "*", Behavior: BehaviorDeny, Source: "admin", Scope: "global"}
	if err := e.db.AddRules(context.Background(), []*storage.PermissionRule{bad}); err != nil {
		t.Fatal(err)
	}
	info := e.start("alice", "s1", "write")
	evs := e.until(info.RequestID, 0, KindSuspended, KindRunEnded)
	ask := find(evs, KindAsk)
	if ask == nil {
		t.Fatalf("the call under an unparseable deny rule was not asked about: %v", kinds(evs))
	}
	if d := ask.Ask.Calls[0].RuleDescription; !strings.Contains(d, fmt.Sprintf("rule %d ", bad.ID)) || !strings.Contains(d, "cannot be parsed") {
		t.Fatalf("the ask's reason: %q, want it to name rule %d", d, bad.ID)
	}
}

// A client resends its answers to every ask of the pause (AI SDK, AG-UI): one a reviewer
// answered meanwhile the same way is a no-op, and the resend settles the rest, where it was a
// 409 already answered that left the client no way on. One that contradicts the earlier
// answer, or approves other arguments, stays refused, naming the ask and who answered it.
func TestResendAfterAReviewerAnswered(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, hitlScript, Config{DefaultBehavior: BehaviorAsk})
		info := e.start("alice", "s1", "two")
		evs := e.until(info.RequestID, 0, KindSuspended)
		calls := find(evs, KindAsk).Ask.Calls
		if len(calls) != 2 {
			t.Fatalf("asks: %+v", calls)
		}
		a, b := calls[0].AskID, calls[1].AskID
		if err := e.rt.AnswerApproval(context.Background(), a, true, "fine", "reviewer:bob", nil); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []Answer{
			{AskID: a, Approved: false},
			{AskID: a, Approved: true, Input: json.RawMessage(`{"path":"other.txt","content":"x"}`)},
		} {
			err := e.rt.Reply(context.Background(), "alice", info.RequestID, Reply{Whole: true,
				Answers: []Answer{bad, {AskID: b, Approved: true}}})
			if !errors.Is(err, ErrAlreadyAnswered) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), "reviewer:bob") {
				t.Fatalf("a conflicting answer to %s: %v, want ErrAlreadyAnswered naming the ask and reviewer:bob", a, err)
			}
		}
		if err := e.rt.Reply(context.Background(), "alice", info.RequestID, Reply{Whole: true, Answers: []Answer{{AskID: a, Approved: true}}}); !errors.Is(err, ErrUnsettled) {
			t.Fatalf("a whole reply leaving %s open: %v, want ErrUnsettled", b, err)
		}
		err := e.rt.Reply(context.Background(), "alice", info.RequestID, Reply{Whole: true,
			Answers: []Answer{{AskID: a, Approved: true}, {AskID: b, Approved: false}}})
		if err != nil {
			t.Fatalf("the resend: %v", err)
		}
		end := e.until(info.RequestID, evs[len(evs)-1].Seq, KindRunEnded)
		var states []string
		for _, ev := range end {
			if ev.Kind == KindToolResultEnded {
				states = append(states, ev.Tool.State)
			}
		}
		if !slices.Equal(states, []string{ToolSuccess, ToolDenied}) {
			t.Fatalf("the calls after the resend: %v (%s)", states, kinds(end))
		}
		ask, err := db.GetAsk(context.Background(), a)
		if err != nil || !strings.Contains(string(ask.Answer), "reviewer:bob") {
			t.Fatalf("the reviewer's answer after the resend: %s %v", ask.Answer, err)
		}
	})
}
