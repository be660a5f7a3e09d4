package aisdk_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/aisdk"
	"github.com/hookd/hookd/storage/storagetest"
	"github.com/hookd/hookd/test/dialecttest"
)

// reconnectScript holds answers of several responses and steps, whose last step is slow enough
// to reconnect during it.
const reconnectScript = `{"scripts":[
 {"match":"/ask slowly/","steps":[
   {"toolCalls":[{"name":"workspace_write_file","arguments":{"path":"a.txt","content":"x"}}]},
   {"text":"Written; now a look around.","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"Everything is in place.","delayMs":1000}]},
 {"match":"/three steps/","steps":[
   {"text":"Step one.","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"Step two.","toolCalls":[{"name":"workspace_list_files"}]},
   {"text":"Step three, the answer.","delayMs":1000}]},
 {"match":"/pick/","steps":[
   {"toolCalls":[{"name":"client_pick","arguments":{"options":["A","B"]}}]},
   {"text":"You picked it."}]},
 {"match":"/budget/","steps":[
   {"toolCalls":[{"name":"workspace_list_files"}],"usage":{"inputTokens":100,"outputTokens":50}},
   {"text":"after budget","usage":{"inputTokens":100,"outputTokens":50}}]},
 {"match":"*","steps":[{"text":"default"}]}
]}`

// newReconnectEnv is newEnv on reconnectScript.
func newReconnectEnv(t *testing.T, cfg agent.Config) *env {
	t.Helper()
	return &env{dialecttest.NewScripted(t, storagetest.SQLite(t), reconnectScript, cfg, register)}
}

// until follows the run of requestID until an event stop accepts, or its end (stop nil).
func (e *env) until(requestID string, stop func(agent.Event) bool) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := e.AE.Runtime.Subscribe(ctx, requestID, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	for ev := range evs {
		if stop != nil && stop(ev) {
			return
		}
	}
	if ctx.Err() != nil {
		e.T.Fatalf("run %s: no such event within 30 s", requestID)
	}
}

func (e *env) status(requestID string) string {
	e.T.Helper()
	v, err := e.AE.Runtime.Run(context.Background(), "local", requestID)
	if err != nil {
		e.T.Fatal(err)
	}
	return v.Status
}

// approve is the client's messages after it approved the call its last response asks about.
func approve(t *testing.T, msgs []any, resp response) []any {
	t.Helper()
	in, ask := first(t, resp.Events, "tool-input-available"), first(t, resp.Events, "tool-approval-request")
	return append(msgs, assistant(requestID(t, resp), map[string]any{"type": "dynamic-tool", "toolName": in["toolName"],
		"toolCallId": in["toolCallId"], "state": "approval-responded", "input": in["input"],
		"approval": map[string]any{"id": ask["approvalId"], "approved": true}}))
}

// startsWith fails unless the resumed stream begins with what the client was streamed before.
func startsWith(t *testing.T, got []map[string]any, before ...[]map[string]any) {
	t.Helper()
	var want []map[string]any
	for _, b := range before {
		want = append(want, b...)
	}
	if len(got) < len(want) || !reflect.DeepEqual(got[:len(want)], want) {
		t.Fatalf("the resumed stream does not begin with what was streamed before:\n got  %s\n want %s", types(got), types(want))
	}
}

// streamed checks a resumed stream's frame: 200, the protocol's header, [DONE].
func streamed(t *testing.T, r response) {
	t.Helper()
	if r.Status != http.StatusOK || r.Header.Get(aisdk.Header) != "v1" || !r.Done {
		t.Fatalf("status %d, header %q, [DONE] %v: %s", r.Status, r.Header.Get(aisdk.Header), r.Done, r.Body)
	}
}

// A reconnect during the answer after an approval: the resumed stream is the whole message —
// the response that asked, then the one that goes on — so the SDK, which drops what it held at
// the stream's first start, finds the call the approval response is about.
func TestResumeAfterAnApprovalReplaysTheWholeMessage(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	msgs := []any{user("m1", "ask slowly")}
	r1 := e.stream(chat("c-ref", msgs))
	r2 := e.stream(chat("c-ref", approve(t, msgs, r1)))
	want := rebuild(t, r1.Events, r2.Events)

	p1 := e.stream(chat("c-drop", msgs))
	deltas := 0
	p2 := e.cut(chat("c-drop", approve(t, msgs, p1)), func(p map[string]any) bool {
		if p["type"] == "text-delta" {
			deltas++
		}
		return deltas == 2
	})
	if s := e.status(requestID(t, p1)); s != agent.StatusRunning {
		t.Fatalf("the run is %s at the reconnect; the test wants it running", s)
	}
	g := e.resume("c-drop", nil)
	streamed(t, g)
	startsWith(t, g.Events, p1.Events, p2.Events)
	got := rebuild(t, g.Events)
	if got.summary() != want.summary() || got.id != aisdk.MessageID(requestID(t, p1)) {
		t.Fatalf("the message rebuilt from the resumed stream:\n%s\nthe message streamed live:\n%s", got.summary(), want.summary())
	}
}

// A reconnect after a crash that broke the stream off in the third step: the resumed stream
// replays the two steps before it, then the run goes on.
func TestResumeAfterACrashReplaysWhatCameBefore(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{})
	steps := 0
	p1 := e.cut(chat("c-crash", []any{user("m1", "three steps")}), func(p map[string]any) bool {
		if p["type"] == "start-step" {
			steps++
		}
		return steps == 3
	})
	e.Restart() // a crash, as this dialect sees it: the stream gone without a finish, the run suspended
	g := e.resume("c-crash", nil)
	streamed(t, g)
	startsWith(t, g.Events, p1.Events)
	m := rebuild(t, g.Events)
	if m.text() != "Step one.Step two.Step three, the answer." || m.finish != "stop" {
		t.Fatalf("the message rebuilt from the resumed stream:\n%s", m.summary())
	}
	if strings.Count(m.summary(), "dynamic-tool [output-available]") != 2 {
		t.Fatalf("the calls of the steps before the crash:\n%s", m.summary())
	}
}

// A drop before the approval request: the resumed stream replays the response up to its
// request, so the client learns what to answer (and the run does not wait for the ask's
// timeout).
func TestResumeBeforeTheApprovalRequestReplaysIt(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	msgs := []any{user("m1", "ask slowly")}
	p1 := e.cut(chat("c-ask", msgs), func(p map[string]any) bool { return p["type"] == "tool-input-start" })
	g := e.resumedToPause(t, "c-ask", p1, "tool-calls")
	if again := e.resume("c-ask", nil); !reflect.DeepEqual(again.Events, g.Events) {
		t.Fatalf("a second resume shows another message:\n got  %s\n want %s", types(again.Events), types(g.Events))
	}
	p2 := e.stream(chat("c-ask", approve(t, msgs, g)))
	if last(p2.Events)["finishReason"] != "stop" {
		t.Fatalf("the approval: %d %s %s", p2.Status, p2.Body, types(p2.Events))
	}
	rebuild(t, g.Events, p2.Events)
}

// A run that ends while its client is away: a reconnect soon after replays the message to its
// end, twice the same; once recentEnd has passed, there is nothing to resume.
func TestResumeSoonAfterTheEndReplaysTheMessage(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{})
	p1 := e.cut(chat("c-end", []any{user("m1", "three steps")}), func(p map[string]any) bool { return p["type"] == "text-delta" })
	e.until(requestID(t, p1), nil)
	g := e.resume("c-end", nil)
	streamed(t, g)
	startsWith(t, g.Events, p1.Events)
	if m := rebuild(t, g.Events); m.text() != "Step one.Step two.Step three, the answer." || m.finish != "stop" {
		t.Fatalf("the message rebuilt from the resumed stream:\n%s", m.summary())
	}
	if again := e.resume("c-end", nil); !reflect.DeepEqual(again.Events, g.Events) {
		t.Fatalf("a second resume shows another message:\n got  %s\n want %s", types(again.Events), types(g.Events))
	}
	aisdk.SetRecentEnd(t, 0)
	if r := e.resume("c-end", nil); r.Status != http.StatusNoContent {
		t.Fatalf("a run that ended before recentEnd: %d", r.Status)
	}
}

// A run stopped by the token budget waits for its user: the resumed stream the SDK opens on
// every page load replays it to its stop, and leaves it stopped (a reload gave it a fresh budget,
// and the next one another, without the user deciding). Sending a message goes on, as before.
func TestResumeLeavesABudgetStop(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{TokenBudget: 120})
	msgs := []any{user("m1", "budget")}
	p1 := e.stream(chat("c-budget", msgs))
	if last(p1.Events)["finishReason"] != "other" {
		t.Fatalf("the budget stop: %s", types(p1.Events))
	}
	g := e.resume("c-budget", nil)
	streamed(t, g)
	if !reflect.DeepEqual(g.Events, p1.Events) {
		t.Fatalf("the resumed stream:\n got  %s\n want %s", types(g.Events), types(p1.Events))
	}
	if s := e.status(requestID(t, p1)); s != agent.StatusSuspended {
		t.Fatalf("a resumed stream went on with a run the budget stopped: %s", s)
	}
	p2 := e.stream(chat("c-budget", append(msgs, user("m2", "go on"))))
	// The run goes on (the message it was sent with may reach the model at its next step, which
	// the budget may stop again).
	if m := rebuild(t, p1.Events, p2.Events); !strings.Contains(m.text(), "after budget") {
		t.Fatalf("a message after the budget stop: %d %s", p2.Status, m.summary())
	}
}

// A run its user suspended stays suspended when the SDK resumes its stream.
func TestResumeLeavesASuspend(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{})
	p1 := e.cut(chat("c-suspend", []any{user("m1", "three steps")}), func(p map[string]any) bool { return p["type"] == "text-delta" })
	if err := e.AE.Runtime.Suspend(context.Background(), "local", requestID(t, p1)); err != nil {
		t.Fatal(err)
	}
	e.resumedToPause(t, "c-suspend", p1, "other")
}

// resumedToPause is the resumed stream of chat, whose run (begun by before) pauses: it begins
// with what before streamed, ends in the pause's finish (finishReason), and the run stays paused.
func (e *env) resumedToPause(t *testing.T, chat string, before response, finishReason string) response {
	t.Helper()
	e.until(requestID(t, before), func(ev agent.Event) bool { return ev.Kind == agent.KindSuspended })
	g := e.resume(chat, nil)
	streamed(t, g)
	startsWith(t, g.Events, before.Events)
	if last(g.Events)["finishReason"] != finishReason {
		t.Fatalf("resumed %s", types(g.Events))
	}
	if s := e.status(requestID(t, before)); s != agent.StatusSuspended {
		t.Fatalf("a resumed stream went on with a paused run: %s", s)
	}
	return g
}

// Two resumes at once after a crash: one resumes the run, the other follows it; both stream
// the whole message.
func TestConcurrentResumesBothFollowTheRun(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{})
	steps := 0
	e.cut(chat("c-two", []any{user("m1", "three steps")}), func(p map[string]any) bool {
		if p["type"] == "start-step" {
			steps++
		}
		return steps == 3
	})
	e.Restart() // a crash, as this dialect sees it: the stream gone without a finish, the run suspended
	var rs [2]response
	var wg sync.WaitGroup
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i] = e.resume("c-two", nil)
		}()
	}
	wg.Wait()
	for i, r := range rs {
		if r.Status != http.StatusOK || !r.Done || last(r.Events)["finishReason"] != "stop" {
			t.Fatalf("resume %d: %d %s", i, r.Status, types(r.Events))
		}
	}
	if !reflect.DeepEqual(rs[0].Events, rs[1].Events) {
		t.Fatalf("the two resumes differ:\n %s\n %s", types(rs[0].Events), types(rs[1].Events))
	}
}

// The client's own tool calls replay as they were: static parts, with the output the client
// sent.
func TestResumeReplaysTheClientsToolOutputs(t *testing.T) {
	e := newReconnectEnv(t, agent.Config{})
	tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option"}}
	msgs := []any{user("m1", "pick one")}
	p1 := e.stream(chat("c-pick", msgs, "tools", tools))
	in := first(t, p1.Events, "tool-input-available")
	msgs = append(msgs, assistant(requestID(t, p1), map[string]any{"type": "tool-client_pick", "toolCallId": in["toolCallId"],
		"state": "output-available", "input": in["input"], "output": map[string]any{"choice": "B"}}))
	p2 := e.stream(chat("c-pick", msgs, "tools", tools))
	g := e.resume("c-pick", nil)
	streamed(t, g)
	m := rebuild(t, g.Events)
	if !strings.Contains(m.summary(), `tool-client_pick [output-available] {"choice":"B"}`) || m.text() != "You picked it." {
		t.Fatalf("the message rebuilt from the resumed stream:\n%s\nlive:\n%s", m.summary(), rebuild(t, p1.Events, p2.Events).summary())
	}
}
