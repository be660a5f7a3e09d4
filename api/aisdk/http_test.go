package aisdk_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage/storagetest"
)

// With API keys, every request needs one; a chat is the key's user's own: another user's
// approval finds nothing to approve and another user's resume finds no stream.
func TestAPIKeysAndIsolation(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk},
		wire.APIKey{Key: "key-alice", UserID: "alice", PrincipalID: 1}, wire.APIKey{Key: "key-bob", UserID: "bob", PrincipalID: 2})
	alice, bob := []string{"Authorization", "Bearer key-alice"}, []string{"Authorization", "Bearer key-bob"}
	msgs := []any{user("m1", "confirm the write")}
	if r := e.do(chat("c-1", msgs), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	if r := e.resume("c-1", []string{"Authorization", "Bearer nope"}); r.Status != http.StatusUnauthorized {
		t.Fatalf("resume, wrong key: %d %s", r.Status, r.Body)
	}
	p1 := e.do(chat("c-1", msgs), alice)
	ask := first(t, p1.Events, "tool-approval-request")
	in := first(t, p1.Events, "tool-input-available")
	msgs = append(msgs, assistant(requestID(t, p1), map[string]any{"type": "dynamic-tool", "toolName": "workspace_write_file",
		"toolCallId": in["toolCallId"], "state": "approval-responded", "input": in["input"],
		"approval": map[string]any{"id": ask["approvalId"], "approved": true}}))
	if r := e.do(chat("c-1", msgs), bob); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "nothing in chat") {
		t.Fatalf("bob approved alice's call: %d %s", r.Status, r.Body)
	}
	if r := e.resume("c-1", bob); r.Status != http.StatusNoContent {
		t.Fatalf("bob resumed alice's stream: %d", r.Status)
	}
	if r := e.resume("c-1", alice); r.Status != http.StatusOK || !reflect.DeepEqual(r.Events, p1.Events) {
		t.Fatalf("a stream that waits for an approval replays to its request: %d %s", r.Status, types(r.Events))
	}
	p2 := e.do(chat("c-1", msgs), alice)
	if last(p2.Events)["finishReason"] != "stop" {
		t.Fatalf("alice's approval: %s", types(p2.Events))
	}
}

func TestBadRequestsNameTheField(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	for _, c := range []struct {
		in   map[string]any
		want string
	}{
		{chat("", []any{user("m1", "hi")}), "id: is required"},
		{chat("c", []any{}), "messages: is required"},
		{chat("c", []any{user("m1", "hi")}, "trigger", "regenerate-message"), "trigger:"},
		{chat("c", []any{user("m1", "hi")}, "bogus", true), "bogus: unknown field"},
		{chat("c", []any{map[string]any{"id": "m1", "role": "robot", "parts": []any{}}}), "messages[0].role"},
		{chat("c", []any{map[string]any{"id": "m1", "role": "assistant", "parts": []any{}}}), "the last message must be the user's"},
		{chat("c", []any{map[string]any{"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "file", "url": "x"}}}}), "hookd reads the text parts"},
		{chat("c", []any{user("m1", "hi")}, "temperature", 3), "temperature:"},
	} {
		if r := e.stream(c.in); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%v: %d %s (want %q)", c.in, r.Status, r.Body, c.want)
		}
	}
	if r := e.resume("nobody", nil); r.Status != http.StatusNoContent {
		t.Errorf("unknown chat: %d", r.Status)
	}
	if r := e.Send(mustReq(t, e.Srv.URL+"/ai-sdk/chat/c/stream?since=1"), nil, nil); r.Status != http.StatusBadRequest {
		t.Errorf("unknown query parameter: %d %s", r.Status, r.Body)
	}
	p1 := e.stream(chat("c-ask", []any{user("m1", "confirm the write")}))
	if last(p1.Events)["finishReason"] != "tool-calls" {
		t.Fatal(types(p1.Events))
	}
	// The answer hookd acts on is read strictly: a misspelt reason is refused, not dropped; the
	// rest of the client's records (the part's own fields) are its own.
	ask, in := first(t, p1.Events, "tool-approval-request"), first(t, p1.Events, "tool-input-available")
	answered := func(approval map[string]any) []any {
		return []any{user("m1", "confirm the write"), assistant(requestID(t, p1), map[string]any{"type": "dynamic-tool",
			"toolName": "workspace_write_file", "toolCallId": in["toolCallId"], "state": "approval-responded", "input": in["input"],
			"providerExecuted": false, "approval": approval})}
	}
	if r := e.stream(chat("c-ask", answered(map[string]any{"id": ask["approvalId"], "approved": false, "reasn": "not now"}))); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Body), `messages[1].parts[1].approval.reasn: unknown field (did you mean`) {
		t.Errorf("a misspelt field of an approval answer: %d %s", r.Status, r.Body)
	}
	if r := e.stream(chat("c-ask", []any{user("m1", "confirm the write"), user("m2", "and now?")})); r.Status != http.StatusConflict ||
		!strings.Contains(string(r.Body), "waits for responses to its tool approval requests") {
		t.Errorf("a new message during an approval: %d %s", r.Status, r.Body)
	}
}

// A response streams the run on from its pause, so a request settles every approval the run
// waits for, or is refused (409 naming the rest) keeping nothing: answering one of two gave a
// response that streamed nothing until another request answered the other.
func TestResumeAnswersEveryApproval(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	msgs := []any{user("m1", "write both files")}
	p1 := e.stream(chat("c-two", msgs))
	asks, calls := approvalRequests(t, p1)
	part := func(i int, approval map[string]any) map[string]any {
		state := "approval-requested"
		if _, ok := approval["approved"]; ok {
			state = "approval-responded"
		}
		return map[string]any{"type": "dynamic-tool", "toolName": "workspace_write_file", "toolCallId": calls[i], "state": state,
			"input": map[string]any{}, "approval": approval}
	}
	one := append(msgs, assistant(requestID(t, p1), part(0, map[string]any{"id": asks[0], "approved": true}), part(1, map[string]any{"id": asks[1]})))
	done := make(chan response, 1)
	go func() { done <- e.do(chat("c-two", one), nil) }()
	select {
	case r := <-done:
		if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), asks[1].(string)) || strings.Contains(string(r.Body), asks[0].(string)) {
			t.Fatalf("one of two answered: %d %s", r.Status, r.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("one of two answered: the response streams nothing")
	}
	both := append(msgs, assistant(requestID(t, p1), part(0, map[string]any{"id": asks[0], "approved": true}), part(1, map[string]any{"id": asks[1], "approved": false})))
	if r := e.stream(chat("c-two", both)); r.Status != http.StatusOK || last(r.Events)["finishReason"] != "stop" {
		t.Fatalf("both answered (the first was not kept when refused): %d %s", r.Status, types(r.Events))
	}
}

func mustReq(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The client's resend answers every approval of the pause, built from the pause's parts: one a
// reviewer answered meanwhile the same way is a no-op and the run goes on, where the resend was
// a 409 already answered and the chat could not go on. Answered otherwise, it stays a 409 naming
// the approval and the reviewer.
func TestResendAfterAReviewerAnsweredOne(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), agent.Config{DefaultBehavior: agent.BehaviorAsk})
	msgs := []any{user("m1", "write both files")}
	p1 := e.stream(chat("c-reviewed", msgs))
	asks, calls := approvalRequests(t, p1)
	if err := e.AE.Runtime.AnswerApproval(context.Background(), asks[0].(string), true, "fine", "reviewer:bob", nil); err != nil {
		t.Fatal(err)
	}
	resend := func(first bool) []any {
		part := func(i int, approved bool) map[string]any {
			return map[string]any{"type": "dynamic-tool", "toolName": "workspace_write_file", "toolCallId": calls[i], "state": "approval-responded",
				"input": map[string]any{}, "approval": map[string]any{"id": asks[i], "approved": approved}}
		}
		return append(msgs, assistant(requestID(t, p1), part(0, first), part(1, false)))
	}
	if r := e.do(chat("c-reviewed", resend(false)), nil); r.Status != http.StatusConflict ||
		!strings.Contains(string(r.Body), asks[0].(string)) || !strings.Contains(string(r.Body), "reviewer:bob") {
		t.Fatalf("a denial of what the reviewer approved: %d %s", r.Status, r.Body)
	}
	if r := e.stream(chat("c-reviewed", resend(true))); r.Status != http.StatusOK || last(r.Events)["finishReason"] != "stop" {
		t.Fatalf("the resend: %d %s", r.Status, types(r.Events))
	}
}

// approvalRequests are the approval ids and tool call ids of the two approvals r asks for.
func approvalRequests(t *testing.T, r response) (asks, calls []any) {
	for _, ev := range r.Events {
		if ev["type"] == "tool-approval-request" {
			asks, calls = append(asks, ev["approvalId"]), append(calls, ev["toolCallId"])
		}
	}
	if len(asks) != 2 {
		t.Fatalf("approval requests: %s", types(r.Events))
	}
	return asks, calls
}
