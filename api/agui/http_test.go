package agui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage/storagetest"
)

// With API keys, every run needs one; a thread is the key's user's own, and another user's
// answer to its interrupt finds nothing to answer.
func TestAPIKeysAndIsolation(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk},
		wire.APIKey{Key: "key-alice", UserID: "alice", PrincipalID: 1}, wire.APIKey{Key: "key-bob", UserID: "bob", PrincipalID: 2})
	msgs := []any{user("m1", "confirm the write")}
	if r := e.do(input("t-1", "run-1", msgs), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	if r := e.do(input("t-1", "run-1", msgs), []string{"Authorization", "Bearer nope"}); r.Status != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d %s", r.Status, r.Body)
	}
	p1 := e.do(input("t-1", "run-1", msgs), []string{"Authorization", "Bearer key-alice"})
	it := last(p1.Events)["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	resume := []any{map[string]any{"interruptId": it["id"], "status": "resolved", "payload": map[string]any{"approved": true}}}
	r := e.do(input("t-1", "run-2", msgs, "resume", resume), []string{"Authorization", "Bearer key-bob"})
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "nothing in thread") {
		t.Fatalf("bob answered alice's interrupt: %d %s", r.Status, r.Body)
	}
	if _, err := e.AE.Runtime.Session(t.Context(), "bob", "t-1"); err == nil {
		t.Fatal("bob's request made a session")
	}
	p2 := e.do(input("t-1", "run-2", msgs, "resume", resume), []string{"Authorization", "Bearer key-alice"})
	if last(p2.Events)["type"] != "RUN_FINISHED" || last(p2.Events)["outcome"].(map[string]any)["type"] != "success" {
		t.Fatalf("alice's resume: %s", types(p2.Events))
	}
}

// A run's stream carries SSE comments while nothing happens.
func TestHeartbeats(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{})
	r := e.stream(input("t-hb", "run-1", []any{user("m1", "slow work")}))
	if r.Comments == 0 || last(r.Events)["type"] != "RUN_FINISHED" {
		t.Fatalf("%d comments; %s", r.Comments, types(r.Events))
	}
}

func TestBadInputNamesTheField(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	for _, c := range []struct {
		in   map[string]any
		want string
	}{
		{input("", "r", []any{user("m1", "hi")}), "threadId: is required"},
		{input("t", "", []any{user("m1", "hi")}), "runId: is required"},
		{input("t", "r", []any{user("m1", "hi")}, "bogus", 1), `bogus: unknown field`},
		{input("t", "r", []any{user("m1", "hi")}, "state", []any{1}), "state: must be an object"},
		{input("t", "r", []any{user("m1", "hi")}, "forwardedProps", map[string]any{"modle": "x"}), `forwardedProps.modle: unknown field (did you mean`},
		{input("t", "r", []any{map[string]any{"id": "m1", "role": "user", "content": "hi", "contnet": "x"}}), `messages[0].contnet: unknown field (did you mean`},
		{input("t", "r", []any{map[string]any{"id": "m1", "role": "robot", "content": "x"}}), "messages[0].role"},
		{input("t", "r", []any{map[string]any{"id": "m1", "role": "assistant", "content": "x"}}), "the last message must be the user's"},
		{input("t", "r", []any{user("m1", "hi")}, "resume", []any{map[string]any{"interruptId": "x", "status": "maybe"}}), "resume[0].status"},
		{input("t", "r", []any{user("m1", "hi")}, "resume", []any{map[string]any{"interruptId": "x", "status": "resolved"}}), "resume: nothing in thread"},
	} {
		r := e.stream(c.in)
		if r.Status < 400 || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%v: %d %s (want %q)", c.in, r.Status, r.Body, c.want)
		}
	}
	p1 := e.stream(input("t-ask", "run-1", []any{user("m1", "confirm the write")}))
	if last(p1.Events)["outcome"].(map[string]any)["type"] != "interrupt" {
		t.Fatal(types(p1.Events))
	}
	for _, c := range []struct {
		resume []any
		want   string
	}{
		{nil, "waits for answers to its interrupts"},
		{[]any{map[string]any{"interruptId": "ask_unknown", "status": "resolved"}}, "not an open interrupt"},
	} {
		in := input("t-ask", "run-2", []any{user("m1", "confirm the write")})
		if c.resume != nil {
			in["resume"] = c.resume
		}
		if r := e.stream(in); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%v: %d %s", c.resume, r.Status, r.Body)
		}
	}
	it := last(p1.Events)["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	in := input("t-ask", "run-2", []any{user("m1", "confirm the write")}, "resume",
		[]any{map[string]any{"interruptId": it["id"], "status": "resolved", "payload": map[string]any{"ok": true}}})
	if r := e.stream(in); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "resume[0].payload.ok: unknown field") {
		t.Errorf("bad payload: %d %s", r.Status, r.Body)
	}
	in["resume"] = []any{map[string]any{"interruptId": it["id"], "status": "resolved", "payload": map[string]any{"reason": "fine"}}}
	if r := e.stream(in); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "resume[0].payload.approved: is required") {
		t.Errorf("payload without approved: %d %s", r.Status, r.Body)
	}
}

// A new user message sent while the thread's run is paused is the user's next word: the run
// resumes and takes it (a user_message hook asked about it), where it was dropped without a word.
// The message the run started with, resent with the history, is not taken again.
func TestNewMessageToAPausedRun(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{})
	msgs := []any{user("m1", "slow work")}
	p1 := e.stream(input("t-new", "run-1", msgs), func(ev map[string]any) {
		if ev["type"] == "STEP_STARTED" {
			e.Restart()
		}
	})
	if last(p1.Events)["outcome"].(map[string]any)["type"] != "interrupt" {
		t.Fatalf("pause %s", types(p1.Events))
	}
	p2 := e.stream(input("t-new", "run-2", append(msgs, user("m2", "also list the docs"))))
	var taken []string
	for _, ev := range p2.Events {
		if ev["type"] == "CUSTOM" && ev["name"] == "hookd.input_consumed" {
			taken = append(taken, fmt.Sprint(ev["value"].(map[string]any)["content"]))
		}
	}
	if len(taken) != 1 || taken[0] != "also list the docs" || last(p2.Events)["type"] != "RUN_FINISHED" {
		t.Fatalf("the new message: taken %q, events %s", taken, types(p2.Events))
	}
}

// A run with two interrupts goes on once both are answered: a resume that answers one is refused,
// naming the other, and keeps nothing (its response would stream nothing until another request
// answered the rest).
func TestResumeAnswersEveryInterrupt(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	msgs, its := twoInterrupts(t, e, "t-two")
	r := e.stream(input("t-two", "run-2", msgs, "resume", []any{answer(its[0], true)}))
	if second := its[1].(map[string]any)["id"].(string); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "unanswered: "+second) {
		t.Fatalf("one of two answered: %d %s", r.Status, r.Body)
	}
	r = e.stream(input("t-two", "run-3", msgs, "resume", []any{answer(its[0], true), answer(its[1], false)}))
	if r.Status != http.StatusOK || last(r.Events)["type"] != "RUN_FINISHED" {
		t.Fatalf("both answered: %d %v", r.Status, types(r.Events))
	}
}

// A pause that waits for an approval and for a client-side call at once goes on once both are
// settled: a resume that answers the interrupt without the call's tool message is refused,
// naming the call, and keeps nothing (its response streamed nothing, the run waiting for the
// call's result).
func TestResumeSettlesApprovalAndClientCall(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option", "parameters": map[string]any{"type": "object"}}}
	msgs := []any{user("m1", "mixed, please")}
	p1 := e.stream(input("t-mixed", "run-1", msgs, "tools", tools))
	its := last(p1.Events)["outcome"].(map[string]any)["interrupts"].([]any)
	var pick string
	for _, ev := range p1.Events {
		if ev["type"] == "TOOL_CALL_START" && ev["toolCallName"] == "client_pick" {
			pick = ev["toolCallId"].(string)
		}
	}
	if len(its) != 1 || pick == "" {
		t.Fatalf("pause: %v", types(p1.Events))
	}
	answer := []any{map[string]any{"interruptId": its[0].(map[string]any)["id"], "status": "resolved", "payload": map[string]any{"approved": true}}}
	done := make(chan response, 1)
	go func() { done <- e.stream(input("t-mixed", "run-2", msgs, "tools", tools, "resume", answer)) }()
	select {
	case r := <-done:
		if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), pick) {
			t.Fatalf("the interrupt answered without the client-side call's result: %d %s", r.Status, r.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the interrupt answered without the client-side call's result: the response streams nothing")
	}
	msgs = append(msgs,
		map[string]any{"id": "a1", "role": "assistant", "toolCalls": []any{map[string]any{"id": pick, "type": "function",
			"function": map[string]any{"name": "client_pick", "arguments": `{"options":["A","B"]}`}}}},
		map[string]any{"id": "tm1", "role": "tool", "toolCallId": pick, "content": "B"})
	r := e.stream(input("t-mixed", "run-3", msgs, "tools", tools, "resume", answer))
	if r.Status != http.StatusOK || last(r.Events)["type"] != "RUN_FINISHED" || last(r.Events)["outcome"].(map[string]any)["type"] != "success" {
		t.Fatalf("both settled (the answer was not kept when refused): %d %v", r.Status, types(r.Events))
	}
}

// A client whose stream broke off at a crash never saw the pause's interrupt: the thread's next
// run picks the paused run up without a resume entry.
func TestRunAfterARestartWithoutTheInterrupt(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{})
	msgs := []any{user("m1", "slow work")}
	p1 := e.stream(input("t-crash", "run-1", msgs), func(ev map[string]any) {
		if ev["type"] == "STEP_STARTED" {
			e.Restart()
		}
	})
	if last(p1.Events)["outcome"].(map[string]any)["type"] != "interrupt" {
		t.Fatalf("pause %s", types(p1.Events))
	}
	p2 := e.stream(input("t-crash", "run-2", msgs))
	if last(p2.Events)["type"] != "RUN_FINISHED" || last(p2.Events)["result"].(map[string]any)["text"] != "after the restart" {
		t.Fatalf("resume %s %v", types(p2.Events), last(p2.Events))
	}
}

// twoInterrupts starts a run on thread that asks about two calls, and returns its messages and
// interrupts.
func twoInterrupts(t *testing.T, e *env, thread string) (msgs, its []any) {
	msgs = []any{user("m1", "write both files")}
	p1 := e.stream(input(thread, "run-1", msgs))
	its = last(p1.Events)["outcome"].(map[string]any)["interrupts"].([]any)
	if len(its) != 2 {
		t.Fatalf("interrupts %v", its)
	}
	return msgs, its
}

// answer is a resume entry answering interrupt it.
func answer(it any, approved bool) map[string]any {
	return map[string]any{"interruptId": it.(map[string]any)["id"], "status": "resolved", "payload": map[string]any{"approved": approved}}
}

// The client's resume answers every interrupt of the pause: one a reviewer answered meanwhile
// the same way is a no-op and the run goes on, where the resume was a 409 already answered.
// Answered otherwise, it stays a 409 naming the interrupt and the reviewer.
func TestResumeAfterAReviewerAnsweredOne(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	msgs, its := twoInterrupts(t, e, "t-reviewed")
	first := its[0].(map[string]any)["id"].(string)
	if err := e.AE.Runtime.AnswerApproval(context.Background(), first, true, "fine", "reviewer:bob", nil); err != nil {
		t.Fatal(err)
	}
	r := e.stream(input("t-reviewed", "run-2", msgs, "resume", []any{answer(its[0], false), answer(its[1], false)}))
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), first) || !strings.Contains(string(r.Body), "reviewer:bob") {
		t.Fatalf("a denial of what the reviewer approved: %d %s", r.Status, r.Body)
	}
	r = e.stream(input("t-reviewed", "run-3", msgs, "resume", []any{answer(its[0], true), answer(its[1], false)}))
	if r.Status != http.StatusOK || last(r.Events)["type"] != "RUN_FINISHED" {
		t.Fatalf("the resume: %d %s %v", r.Status, r.Body, types(r.Events))
	}
}
