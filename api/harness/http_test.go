package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent"
	"github.com/hookd/hookd/api/harness"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// The parser itself, on what the WHATWG algorithm allows beyond what hookd writes.
func TestSSEParser(t *testing.T) {
	in := "\uFEFF: a comment\r\ndata:one\r\n\r\ndata: two\rdata:  three\r\rid: 7\nevent: custom\ndata\ndata:x\n\n\n\ndata:no blank line at the end"
	got, err := parseSSE(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []sseEvent{{Type: "message", Data: "one"}, {Type: "message", Data: "two\n three"},
		{Type: "custom", Data: "\nx", LastEventID: "7"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// SSE over real TCP: every event is one `data:<json>` line (no space, as the document writes
// it) followed by a blank line, and the independent parser gets them all back.
func TestSSEFraming(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{})
	resp := e.chat(body("s-frame", "整理 tasks"), acceptSSE)
	if resp.Status != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.RequestID == "" {
		t.Fatalf("status %d, headers %v", resp.Status, resp.Header)
	}
	frames := strings.Split(string(resp.Raw), "\n\n")
	if frames[len(frames)-1] != "" {
		t.Fatalf("the stream does not end with a blank line: %q", frames[len(frames)-1])
	}
	frames = frames[:len(frames)-1]
	if len(frames) != len(resp.Events) || len(frames) < 10 {
		t.Fatalf("%d frames, %d events", len(frames), len(resp.Events))
	}
	for i, f := range frames {
		if !strings.HasPrefix(f, "data:{") || strings.Contains(f, "\n") || !json.Valid([]byte(f[len("data:"):])) {
			t.Fatalf("frame %d: %q", i, f)
		}
	}
	if errs := validateEvents(resp.Events, true); len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
}

// The JSON array is written as the run goes: its first events arrive while the run still runs,
// and the whole body is one JSON array. No Accept header means the array form.
func TestJSONArrayIsIncremental(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{})
	resp, err := http.DefaultClient.Do(e.post(body("s-array", "slow"), ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q", ct)
	}
	var raw bytes.Buffer
	buf := make([]byte, 4096)
	for !bytes.Contains(raw.Bytes(), []byte(harness.TypeModelCallStart)) {
		n, err := resp.Body.Read(buf)
		raw.Write(buf[:n])
		if err != nil {
			t.Fatalf("body ended before MODEL_CALL_START: %v %s", err, raw.Bytes())
		}
	}
	run, err := e.rt.Run(context.Background(), "user-10001", resp.Header.Get("X-Request-Id"))
	if err != nil || run.Status != storage.RunRunning {
		t.Fatalf("the array's head came only after the run: %s %v", run.Status, err)
	}
	rest, _ := io.ReadAll(resp.Body)
	raw.Write(rest)
	var evs []json.RawMessage
	if err := json.Unmarshal(raw.Bytes(), &evs); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, raw.Bytes())
	}
	if types(evs)[0] != harness.TypeAgentStart || lastType(evs) != harness.TypeAgentEnd {
		t.Fatalf("events %v", types(evs))
	}
}

// A failing run is still a complete JSON array (and a complete SSE stream), ending with the
// error as AGENT_RESULT and AGENT_END.
func TestFailureEndsTheStreamCleanly(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{})
	for _, accept := range []string{acceptJSON, acceptSSE} {
		resp := e.chat(body("s-fail-"+accept, "fatal"), accept)
		if resp.Status != 200 {
			t.Fatalf("%s: status %d", accept, resp.Status)
		}
		if accept == acceptJSON && (!bytes.HasPrefix(resp.Raw, []byte("[")) || !bytes.HasSuffix(bytes.TrimSpace(resp.Raw), []byte("]"))) {
			t.Fatalf("array: %s", resp.Raw)
		}
		ts := types(resp.Events)
		if strings.Join(ts[len(ts)-2:], " ") != "AGENT_RESULT AGENT_END" {
			t.Fatalf("%s: %v", accept, ts)
		}
		if errs := validateEvents(resp.Events, true); len(errs) > 0 {
			t.Fatal(strings.Join(errs, "\n"))
		}
	}
}

// A client that goes away mid-stream does not stop the run: it finishes, a Subscribe sees its
// end, the session is busy until then (409) and takes the next turn afterwards with the
// earlier one in its context.
func TestClientDisconnect(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		e := newEnv(t, db, script, agent.Config{})
		u, _ := url.Parse(e.srv.URL)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		payload := `{"sessionId":"s-gone","userId":"user-10001","input":"slow"}`
		fmt.Fprintf(conn, "POST /harness/chat HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
			u.Host, len(payload), payload)
		br := bufio.NewReader(conn)
		var requestID string
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before MODEL_CALL_START: %v", err)
			}
			if v, ok := strings.CutPrefix(line, "X-Request-Id: "); ok {
				requestID = strings.TrimSpace(v)
			}
			if strings.Contains(line, harness.TypeModelCallStart) {
				break
			}
		}
		conn.Close() // gone, mid-answer

		if resp := e.chat(body("s-gone", "plain"), acceptJSON); resp.Status != http.StatusConflict ||
			!strings.Contains(resp.Wrapper.Message, "sessionId") {
			t.Fatalf("while the run goes on: %d %+v", resp.Status, resp.Wrapper)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		ch, err := e.rt.Subscribe(ctx, requestID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var last agent.Event
		for ev := range ch {
			last = ev
		}
		if last.Kind != agent.KindRunEnded || last.End.Outcome != agent.OutcomeCompleted {
			t.Fatalf("the run did not finish on its own: %+v", last)
		}
		resp := e.chat(body("s-gone", "plain"), acceptJSON)
		if resp.Status != 200 || lastType(resp.Events) != harness.TypeAgentEnd {
			t.Fatalf("next turn: %d %v", resp.Status, types(resp.Events))
		}
		sess, _ := e.rt.Session(context.Background(), "user-10001", "s-gone")
		h, _ := e.rt.History(context.Background(), sess.ID, time.Time{})
		if len(h) != 4 || h[1].Text != "this answer streams slowly" {
			t.Fatalf("history %+v", h)
		}
	})
}

func TestAuth(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{}, wire.APIKey{Key: "key-10001", UserID: "user-10001", PrincipalID: 1001})
	b := body("s-auth", "plain")
	cases := []struct {
		name   string
		header []string
		body   any
		status int
	}{
		{"no key", nil, b, http.StatusUnauthorized},
		{"wrong key", []string{"Authorization", "Bearer nope"}, b, http.StatusUnauthorized},
		{"not bearer", []string{"Authorization", "key-10001"}, b, http.StatusUnauthorized},
		{"another user's body", []string{"Authorization", "Bearer key-10001"}, body("s-auth", "plain", "userId", "user-2"), http.StatusForbidden},
		{"unauthenticated malformed body", nil, `{"sessionId":`, http.StatusUnauthorized},
		{"good", []string{"Authorization", "Bearer key-10001"}, b, http.StatusOK},
	}
	for _, c := range cases {
		resp := e.chat(c.body, acceptJSON, c.header...)
		if resp.Status != c.status {
			t.Fatalf("%s: %d %s", c.name, resp.Status, resp.Raw)
		}
	}
	// The key's principal reaches the run.
	sess, err := e.rt.Session(context.Background(), "user-10001", "s-auth")
	if err != nil || sess.PrincipalID == nil || *sess.PrincipalID != 1001 {
		t.Fatalf("session %+v %v", sess, err)
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{})
	cases := []struct {
		body  any
		field string
	}{
		{map[string]any{"userId": "u", "input": "x"}, "sessionId"},
		{map[string]any{"sessionId": "  ", "userId": "u", "input": "x"}, "sessionId"},
		{map[string]any{"sessionId": "s", "input": "x"}, "userId"},
		{map[string]any{"sessionId": "s", "userId": "\t", "input": "x"}, "userId"},
		{map[string]any{"sessionId": "s", "userId": "u"}, "input"},
		{map[string]any{"sessionId": "s", "userId": "u", "input": "   "}, "input"},
		{map[string]any{"sessionId": "s", "userId": "u", "input": 7}, "input"},
		{`{"sessionId": "s",`, "body"},
		{"", "body"},
		{map[string]any{"sessionId": "s", "userId": "u", "input": "x", "chatModel": map[string]any{"temperature": 3}}, "chatModel.temperature"},
		{map[string]any{"sessionId": "s", "userId": "u", "input": "x", "externalTools": []any{map[string]any{"description": "d"}}}, "externalTools[0].name"},
		{map[string]any{"sessionId": "s", "userId": "u", "input": "x", "externalTools": []any{map[string]any{"name": "t", "parameters": "no"}}}, "externalTools[0].parameters"},
		{map[string]any{"sessionId": "s", "userId": "u", "confirmResults": []any{map[string]any{"confirmed": true}}}, "confirmResults[0].toolCallId"},
		{map[string]any{"sessionId": "s", "userId": "u", "confirmResults": []any{map[string]any{"toolCallId": "c"}}}, "confirmResults[0].confirmed"},
		{map[string]any{"sessionId": "s", "userId": "u", "confirmResults": []any{map[string]any{"toolCallId": "c", "confirmed": true, "input": "x"}}}, "confirmResults[0].input"},
		{map[string]any{"sessionId": "s", "userId": "u", "confirmResults": []any{map[string]any{"toolCallId": "c", "confirmed": true,
			"rules": []any{map[string]any{"tool_name": "t", "rule_content": "x", "behavior": "maybe"}}}}}, "confirmResults[0].rules[0].behavior"},
		{map[string]any{"sessionId": "s", "userId": "u", "toolResults": []any{map[string]any{"output": []any{}}}}, "toolResults[0].id"},
		{map[string]any{"sessionId": "s", "userId": "u", "toolResults": []any{map[string]any{"id": "c", "state": "fine"}}}, "toolResults[0].state"},
		{map[string]any{"sessionId": "s", "userId": "u", "toolResults": []any{map[string]any{"id": "c", "output": []any{map[string]any{"text": "no type"}}}}}, "toolResults"},
	}
	for i, c := range cases {
		resp := e.chat(c.body, acceptSSE)
		if resp.Status != http.StatusBadRequest || !strings.HasPrefix(resp.Wrapper.Message, c.field) {
			t.Errorf("case %d: %d %q (want 400 naming %s)", i, resp.Status, resp.Wrapper.Message, c.field)
		}
	}
}

func TestConflicts(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	conflict := func(b map[string]any, field string) {
		t.Helper()
		resp := e.chat(b, acceptJSON)
		if resp.Status != http.StatusConflict || !strings.HasPrefix(resp.Wrapper.Message, field) {
			t.Fatalf("%v: %d %q (want 409 naming %s)", b, resp.Status, resp.Wrapper.Message, field)
		}
	}
	// Nothing waits: no session, then a finished turn.
	conflict(body("s-none", "", "confirmResults", []any{map[string]any{"toolCallId": "c1", "confirmed": true}}), "confirmResults")
	if r := e.chat(body("s-done", "plain"), acceptJSON); r.Status != 200 {
		t.Fatal(r.Status)
	}
	conflict(body("s-done", "", "toolResults", []any{map[string]any{"id": "c1", "output": []any{}}}), "toolResults")

	// A pause waiting for confirmation: results for other calls, tool results.
	p := e.chat(body("s-ask", "confirm please"), acceptSSE)
	call := toolCallID(t, p.Events, harness.TypeRequireUserConfirm)
	conflict(body("s-ask", "", "confirmResults", []any{map[string]any{"toolCallId": "call_nope", "confirmed": true}}), "confirmResults")
	conflict(body("s-ask", "", "toolResults", []any{map[string]any{"id": call, "output": []any{}}}), "toolResults")
	// Refused whole, leaving nothing behind: one call answered twice, with input beside it (the
	// input was queued, the first answer kept, and the run waited for good).
	conflict(body("s-ask", "also this", "confirmResults", []any{map[string]any{"toolCallId": call, "confirmed": false},
		map[string]any{"toolCallId": call, "confirmed": true}}), "confirmResults")
	conflict(body("s-ask", "also that", "toolResults", []any{map[string]any{"id": call, "output": []any{}}}), "toolResults")
	// The right answer goes through, once.
	ok := e.chat(body("s-ask", "", "confirmResults", []any{map[string]any{"toolCallId": call, "confirmed": true}}), acceptJSON)
	if ok.Status != 200 || types(ok.Events)[0] != harness.TypeAgentStart || types(ok.Events)[1] != harness.TypeUserConfirmResult {
		t.Fatalf("resume: %d %v", ok.Status, types(ok.Events))
	}
	for _, ev := range ok.Events {
		if strings.Contains(string(ev), "also this") || strings.Contains(string(ev), "also that") {
			t.Fatalf("the refused request's input reached the run: %s", ev)
		}
	}
	next := toolCallID(t, ok.Events, harness.TypeRequireUserConfirm)
	conflict(body("s-ask", "", "confirmResults", []any{map[string]any{"toolCallId": call, "confirmed": true}}), "confirmResults")
	e.chat(body("s-ask", "", "confirmResults", []any{map[string]any{"toolCallId": next, "confirmed": false}}), acceptJSON)

	// A running turn: a second request is refused, resume fields or not.
	resp, err := http.DefaultClient.Do(e.post(body("s-busy", "slow"), acceptSSE))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	conflict(body("s-busy", "plain"), "sessionId")
	conflict(body("s-busy", "", "confirmResults", []any{map[string]any{"toolCallId": "c", "confirmed": true}}), "sessionId")
	_, _ = io.Copy(io.Discard, resp.Body)
}

// A resume's response streams the run on, so the request settles everything the run waits for,
// or is refused (409 naming what is left) keeping nothing: confirming one of two calls gave a
// response that streamed nothing until another request confirmed the other, and input sent
// while a client-side call waited was refused yet queued, and reached the model with the call's
// output later.
func TestResumeSettlesEveryPendingCall(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	client := &http.Client{Timeout: 5 * time.Second}
	send := func(b map[string]any) (int, string) {
		t.Helper()
		resp, err := client.Do(e.post(b, acceptJSON))
		if err != nil {
			t.Fatalf("%v: %v", b, err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%v: %v", b, err)
		}
		return resp.StatusCode, string(raw)
	}
	p := e.chat(body("s-two", "both files"), acceptSSE)
	calls := first(t, p.Events, harness.TypeRequireUserConfirm)["toolCalls"].([]any)
	if len(calls) != 2 {
		t.Fatalf("calls %v", calls)
	}
	a, b := calls[0].(map[string]any)["id"].(string), calls[1].(map[string]any)["id"].(string)
	confirm := func(id string, ok bool) map[string]any { return map[string]any{"toolCallId": id, "confirmed": ok} }
	if status, raw := send(body("s-two", "", "confirmResults", []any{confirm(a, true)})); status != http.StatusConflict ||
		!strings.Contains(raw, "confirmResults:") || !strings.Contains(raw, b) || strings.Contains(raw, a) {
		t.Fatalf("one of two confirmed: %d %s", status, raw)
	}
	if status, raw := send(body("s-two", "", "confirmResults", []any{confirm(a, true), confirm(b, false)})); status != http.StatusOK ||
		!strings.Contains(raw, "both handled") {
		t.Fatalf("both confirmed (the first was not kept when refused): %d %s", status, raw)
	}

	tools := []any{map[string]any{"name": "client_pick", "description": "the user picks one option", "parameters": map[string]any{"type": "object"}}}
	p = e.chat(body("s-ext", "external pick", "externalTools", tools), acceptSSE)
	call := toolCallID(t, p.Events, harness.TypeRequireExternalExecution)
	if status, raw := send(body("s-ext", "actually blue")); status != http.StatusConflict || !strings.Contains(raw, call) {
		t.Fatalf("input while a client-side call waits: %d %s", status, raw)
	}
	status, raw := send(body("s-ext", "", "toolResults", []any{map[string]any{"id": call, "name": "client_pick",
		"output": []any{map[string]any{"type": "text", "text": "B"}}, "state": "success"}}))
	if status != http.StatusOK || !strings.Contains(raw, "picked") || strings.Contains(raw, "actually blue") {
		t.Fatalf("the output, after a refused input: %d %s", status, raw)
	}
}

// §7.1's resend refuses what still waits: a call of the pause answered meanwhile elsewhere (a
// reviewer, the platform's permission reply) keeps its answer, where the resend refused it again
// and was itself refused (409 already answered), leaving the user no way on but confirmResults.
func TestResendAfterAnAnswerElsewhere(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	p := e.chat(body("s-resend-two", "both files"), acceptSSE)
	calls := first(t, p.Events, harness.TypeRequireUserConfirm)["toolCalls"].([]any)
	a := calls[0].(map[string]any)["id"].(string)
	if err := e.rt.Answer(context.Background(), "user-10001", p.RequestID, []agent.Answer{{CallID: a, Approved: true}}); err != nil {
		t.Fatal(err)
	}
	r := e.chat(body("s-resend-two", "never mind"), acceptSSE)
	if r.Status != http.StatusOK || lastType(r.Events) != harness.TypeAgentEnd {
		t.Fatalf("resend: %d %s %v", r.Status, r.Wrapper.Message, types(r.Events))
	}
	cr, _ := json.Marshal(first(t, r.Events, harness.TypeUserConfirmResult))
	if !strings.Contains(string(cr), `"confirmed":true`) || !strings.Contains(string(cr), `"confirmed":false`) {
		t.Fatalf("USER_CONFIRM_RESULT: %s", cr)
	}
}

// Same (userId, sessionId) accumulates context; another user with the same sessionId has a
// session of their own and can neither see nor resume the first one's pause.
func TestSessionsPerUser(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	alice := func(input string, extra ...any) map[string]any {
		b := body("shared", input, extra...)
		b["userId"] = "alice"
		return b
	}
	bob := func(input string, extra ...any) map[string]any {
		b := body("shared", input, extra...)
		b["userId"] = "bob"
		return b
	}
	p := e.chat(alice("confirm please"), acceptSSE)
	call := toolCallID(t, p.Events, harness.TypeRequireUserConfirm)
	if r := e.chat(bob("", "confirmResults", []any{map[string]any{"toolCallId": call, "confirmed": true}}), acceptJSON); r.Status != http.StatusConflict {
		t.Fatalf("bob resumed alice's run: %d", r.Status)
	}
	if r := e.chat(bob("plain"), acceptJSON); r.Status != 200 || lastType(r.Events) != harness.TypeAgentEnd {
		t.Fatalf("bob's own turn: %d %s", r.Status, r.Raw)
	}
	if r := e.chat(bob("plain again"), acceptJSON); r.Status != 200 {
		t.Fatalf("bob's second turn: %d", r.Status)
	}
	a, _ := e.rt.Session(context.Background(), "alice", "shared")
	b, _ := e.rt.Session(context.Background(), "bob", "shared")
	if a.ID == b.ID {
		t.Fatal("alice and bob share a session")
	}
	hb, _ := e.rt.History(context.Background(), b.ID, time.Time{})
	if len(hb) != 4 || hb[0].Text != "plain" || hb[2].Text != "plain again" {
		t.Fatalf("bob's context: %+v", hb)
	}
	ha, _ := e.rt.History(context.Background(), a.ID, time.Time{})
	if len(ha) != 2 || ha[0].Text != "confirm please" {
		t.Fatalf("alice's context: %+v", ha)
	}
}

// chatModel reaches the run: the model name and temperature of the request are the run's.
func TestChatModel(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{})
	resp := e.chat(body("s-model", "plain", "chatModel", map[string]any{"name": "gpt-oss-120b", "stream": false, "temperature": 0.7}), acceptJSON)
	if resp.Status != 200 {
		t.Fatal(resp.Status)
	}
	run, err := e.rt.Run(context.Background(), "user-10001", resp.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if spec := run.Request; spec.Model != "gpt-oss-120b" || spec.Temperature == nil || *spec.Temperature != 0.7 {
		t.Fatalf("run request %+v", spec)
	}
}

// Input sent with a resume becomes a user message of the run.
func TestResumeWithInput(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{TokenBudget: 120})
	var all []json.RawMessage
	p := e.chat(body("s-in", "budget"), acceptSSE)
	all = append(all, p.Events...)
	p = e.chat(body("s-in", "也请列出文件"), acceptSSE)
	all = append(all, p.Events...)
	if lastType(p.Events) != harness.TypeAgentEnd || count(p.Events, harness.TypeAgentResult) == 0 {
		p = e.chat(body("s-in", ""), acceptSSE)
		all = append(all, p.Events...)
	}
	found := false
	for _, raw := range all {
		m, _ := decode(raw)
		if m["type"] == harness.TypeCustom && m["name"] == harness.CustomInputConsumed {
			v := m["value"].(map[string]any)
			found = v["content"] == "也请列出文件"
		}
	}
	if !found {
		t.Fatalf("no input_consumed: %v", types(all))
	}
	sess, _ := e.rt.Session(context.Background(), "user-10001", "s-in")
	h, _ := e.rt.History(context.Background(), sess.ID, time.Time{})
	var texts []string
	for _, m := range h {
		texts = append(texts, m.Role+":"+m.Text)
	}
	if !strings.Contains(strings.Join(texts, "|"), "user:也请列出文件") {
		t.Fatalf("history %v", texts)
	}
}

// §7.1: during a confirmation pause a plain resend with the same sessionId resumes the run: the
// pending calls count as refused ("the user sent a new message") and the new message is the
// run's next input, in the same run. Both responses are §6-shaped: the paused one ends
// REQUIRE_USER_CONFIRM … AGENT_RESULT (PERMISSION_ASKING) → AGENT_END, the resumed one opens
// with AGENT_START of the same replyId.
func TestResendDuringConfirmation(t *testing.T) {
	e := newEnv(t, storagetest.SQLite(t), script, agent.Config{DefaultBehavior: agent.BehaviorAsk})
	p := e.chat(body("s-resend", "confirm please"), acceptSSE)
	ts := types(p.Events)
	if n := len(ts); n < 3 || ts[0] != harness.TypeAgentStart || ts[n-2] != harness.TypeAgentResult || ts[n-1] != harness.TypeAgentEnd ||
		count(p.Events, harness.TypeRequireUserConfirm) != 1 {
		t.Fatalf("paused response: %v", ts)
	}
	res := first(t, p.Events, harness.TypeAgentResult)["result"].(map[string]any)
	if res["metadata"].(map[string]any)["agentscope_generate_reason"] != "PERMISSION_ASKING" {
		t.Fatalf("paused AGENT_RESULT: %v", res)
	}
	call := toolCallID(t, p.Events, harness.TypeRequireUserConfirm)
	replyID := first(t, p.Events, harness.TypeAgentStart)["replyId"]

	r := e.chat(body("s-resend", "never mind, do something else"), acceptSSE)
	ts = types(r.Events)
	if r.Status != 200 || r.RequestID != p.RequestID || len(ts) < 3 || ts[0] != harness.TypeAgentStart || ts[1] != harness.TypeUserConfirmResult {
		t.Fatalf("resend: %d %s %v", r.Status, r.RequestID, ts)
	}
	if got := first(t, r.Events, harness.TypeAgentStart)["replyId"]; got != replyID {
		t.Fatalf("resumed replyId %v, want %v", got, replyID)
	}
	cr := first(t, r.Events, harness.TypeUserConfirmResult)
	b, _ := json.Marshal(cr)
	if !strings.Contains(string(b), call) || !strings.Contains(string(b), `"confirmed":false`) {
		t.Fatalf("USER_CONFIRM_RESULT: %s", b)
	}
	if !strings.Contains(string(r.Raw), "the user sent a new message") {
		t.Fatalf("the refused call's result does not say why: %s", r.Raw)
	}
	if !strings.Contains(string(r.Raw), "never mind, do something else") {
		t.Fatalf("the new message was not taken into the run: %v", ts)
	}
}
