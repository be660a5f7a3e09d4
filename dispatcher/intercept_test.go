package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A tolerance row is one line of the source document's 容错策略: what the receiver answers and
// what the chain must conclude. failure rows conclude by the hook's failureMode.
type tolRow struct {
	name      string
	hookType  HookType
	timeoutMs int
	// answer writes the receiver's response; target is a second receiver (the redirect target).
	answer   func(rec *recorder, target *recorder, w http.ResponseWriter, r *http.Request)
	failure  bool   // concluded by failureMode
	answered bool   // a failure of an answer hookd cannot use, not of a receiver that did not answer
	flaw     bool   // the decision stands, and the row's error says what of the answer was not used
	want     string // decision when not a failure
	reason   string
	modified *string
	warn     bool // a warning names the hook
}

func reply(status int, body string) func(*recorder, *recorder, http.ResponseWriter, *http.Request) {
	return func(_, _ *recorder, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}

func TestInterceptToleranceRules(t *testing.T) {
	newArgs := `{"amount":10000,"target":"ACC-002"}`
	rows := []tolRow{
		{name: "allow", answer: reply(200, `{"decision":"allow"}`), want: Allow},
		{name: "allow 204-style 2xx", answer: reply(202, `{"decision":"allow"}`), want: Allow},
		{name: "deny with reason", answer: reply(200, `{"decision":"deny","reason":"此转账金额超出授权限额，需人工审批"}`),
			want: Deny, reason: "此转账金额超出授权限额，需人工审批"},
		{name: "modify pre_tool_use", answer: reply(200, `{"decision":"modify","modifiedValue":"{\"amount\":10000,\"target\":\"ACC-002\"}"}`),
			want: Modify, modified: &newArgs},
		{name: "modify user_message", hookType: UserMessage, answer: reply(200, `{"decision":"modify","modifiedValue":"帮我查一下 Q4 财报"}`),
			want: Modify, modified: ptr("帮我查一下 Q4 财报")},
		{name: "DENY upper case", answer: reply(200, `{"decision":"DENY","reason":"r"}`), want: Deny, reason: "r"},
		{name: "Allow mixed case", answer: reply(200, `{"decision":"Allow"}`), want: Allow},
		{name: "MoDiFy mixed case", answer: reply(200, `{"decision":"MoDiFy","modifiedValue":"{\"amount\":10000,\"target\":\"ACC-002\"}"}`),
			want: Modify, modified: &newArgs},
		{name: "empty body", answer: reply(200, ``), want: Allow},
		{name: "missing decision", answer: reply(200, `{}`), want: Allow},
		// The contract reads an unknown decision as allow; the row says what was read ("block" is no deny).
		{name: "unknown decision", answer: reply(200, `{"decision":"maybe"}`), want: Allow, flaw: true, warn: true},
		{name: "block is no deny", answer: reply(200, `{"decision":"block","reason":"r"}`), want: Allow, flaw: true, warn: true},
		{name: "modify without modifiedValue", answer: reply(200, `{"decision":"modify"}`), want: Allow, warn: true},
		{name: "modify with null modifiedValue", answer: reply(200, `{"decision":"modify","modifiedValue":null}`), want: Allow, warn: true},
		{name: "HTTP 400", answer: reply(400, `{"decision":"allow"}`), failure: true},
		{name: "HTTP 500", answer: reply(500, `{"decision":"allow"}`), failure: true},
		{name: "HTTP 302 not followed", answer: func(_, target *recorder, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.srv.URL+"/elsewhere", http.StatusFound)
		}, failure: true},
		{name: "timeout", timeoutMs: 200, answer: func(rec, _ *recorder, w http.ResponseWriter, r *http.Request) {
			rec.block(r, 10*time.Second)
			w.Write([]byte(`{"decision":"allow"}`))
		}, failure: true},
		{name: "unparsable body", answer: reply(200, `not json`), failure: true, answered: true},
		// A byte order mark may be ignored (RFC 8259), and a deny followed by what is not JSON is
		// still the receiver's deny: failureMode ALLOW must not turn either into an allow.
		{name: "deny after a byte order mark", answer: reply(200, "\xEF\xBB\xBF"+`{"decision":"deny","reason":"r"}`), want: Deny, reason: "r"},
		{name: "deny with trailing data", answer: reply(200, `{"decision":"deny","reason":"r"} x`), want: Deny, reason: "r", flaw: true},
		{name: "ask with trailing data", answer: reply(200, `{"decision":"ask","reason":"r"}{`), want: Ask, reason: "r", flaw: true},
		{name: "allow with trailing data", answer: reply(200, `{"decision":"allow"} x`), failure: true, answered: true},
		{name: "truncated deny", answer: reply(200, `{"decision":"deny","reason":"r"`), failure: true, answered: true},
		// encoding/json would take the last of the two: which was meant is not known, and one of
		// them says deny, so the deny stands whatever the failureMode.
		{name: "decision sent twice", answer: reply(200, `{"decision":"deny","decision":"allow"}`), want: Deny, flaw: true},
		{name: "decision sent twice in two cases", answer: reply(200, `{"decision":"deny","reason":"r","Decision":"allow"}`),
			want: Deny, reason: "r", flaw: true},
		{name: "decision sent twice, no deny", answer: reply(200, `{"decision":"allow","Decision":"modify"}`), failure: true, answered: true},
		// A deny whose extras hookd cannot use is still a deny.
		{name: "deny with a malformed hint", answer: reply(200, `{"decision":"deny","reason":"r","hint":3}`), want: Deny, reason: "r", flaw: true},
		{name: "allow with a malformed hint", answer: reply(200, `{"decision":"allow","hint":3}`), failure: true, answered: true},
		// A member of the wrong type leaves the answer unusable, but a deny in it is still a deny:
		// failureMode ALLOW must not turn it into an allow.
		{name: "deny with a reason of the wrong type", answer: reply(200, `{"decision":"deny","reason":5}`), want: Deny, flaw: true},
		{name: "deny after a reason of the wrong type", answer: reply(200, `{"reason":{"a":1},"Decision":" Deny "}`), want: Deny, flaw: true},
		{name: "allow with a reason of the wrong type", answer: reply(200, `{"decision":"allow","reason":5}`), failure: true, answered: true},
		{name: "decision of the wrong type", answer: reply(200, `{"decision":["deny"]}`), failure: true, answered: true},
		// A bare number or boolean is no tool's arguments.
		{name: "modify with a number", answer: reply(200, `{"decision":"modify","modifiedValue":5}`), failure: true, answered: true},
		{name: "modify with a boolean", answer: reply(200, `{"decision":"modify","modifiedValue":true}`), failure: true, answered: true},
		{name: "modify with an object", answer: reply(200, `{"decision":"modify","modifiedValue":{"amount":10000,"target":"ACC-002"}}`),
			want: Modify, modified: &newArgs},
		{name: "unread field sent twice", answer: reply(200, `{"decision":"deny","reason":"r","x":1,"x":2}`), want: Deny, reason: "r"},
		// A well-formed deny past what hookd reads: a failure that says so, not a parse error.
		{name: "answer over the read limit", answer: reply(200, `{"decision":"deny","reason":"r","pad":"`+
			strings.Repeat("x", maxResponseBody)+`"}`), failure: true, answered: true},
		{name: "answer at the read limit", answer: reply(200, `{"decision":"deny","reason":"r","pad":"`+
			strings.Repeat("x", maxResponseBody-len(`{"decision":"deny","reason":"r","pad":""}`))+`"}`), want: Deny, reason: "r"},
	}
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		agent := int64(100)
		for _, row := range rows {
			for _, mode := range []string{FailOpen, FailClosed} {
				agent++
				agentID := agent
				t.Run(row.name+"/"+mode, func(t *testing.T) {
					target := newRecorder(t, nil)
					var rec *recorder
					rec = newRawRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request, _ []byte) {
						row.answer(rec, target, w, r)
					})
					ht := row.hookType
					if ht == "" {
						ht = PreToolUse
					}
					hk := h.add(Hook{HookName: "tol-" + row.name, HookType: ht, AgentID: &agentID,
						DispatchConfig: DispatchConfig{URL: rec.srv.URL, FailureMode: mode, TimeoutMs: row.timeoutMs}})
					ev := Event{HookType: ht, AgentID: &agentID, TraceID: "tr-tol"}
					switch ht {
					case PreToolUse:
						ev.Context = &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_1", Arguments: `{"amount":50000,"target":"ACC-002"}`}
					case UserMessage:
						ev.Context = &UserMessageContext{UserInput: "帮我查一下 Q3 财报", ChatMode: "single_chat",
							TriggerSource: TriggerSource{SourceType: SourceHuman}}
					}
					start := time.Now()
					dec, err := h.d.Intercept(context.Background(), ev)
					elapsed := time.Since(start)
					if err != nil {
						t.Fatalf("intercept: %v", err)
					}
					if rec.count() != 1 {
						t.Fatalf("receiver called %d times, want 1 (interceptive hooks are never retried)", rec.count())
					}
					want, reason, modified := row.want, row.reason, row.modified
					if row.failure {
						want, modified = strings.ToLower(mode), nil
						reason = ""
						if mode == FailClosed {
							reason = "hook " + hk.HookName + " unavailable (failureMode DENY)"
							if row.answered {
								reason = "hook " + hk.HookName + " answered what hookd cannot use (failureMode DENY)"
							}
						}
					}
					if dec.Decision != want || dec.Reason != reason || !samePtr(dec.ModifiedValue, modified) {
						t.Fatalf("decision %+v (modified %v), want %s %q %v", dec, deref(dec.ModifiedValue), want, reason, deref(modified))
					}
					if dec.DecisionID == "" {
						t.Fatal("no decisionId")
					}
					if row.timeoutMs > 0 && (elapsed < 200*time.Millisecond || elapsed > 2*time.Second) {
						t.Errorf("timeout row took %s; want the 200 ms timeout to cut it short", elapsed)
					}
					if target.count() != 0 {
						t.Errorf("redirect followed: target hit %d times", target.count())
					}
					logged := h.decisions(dec.DecisionID, 1)[0]
					env := rec.envelopes(t)[0]
					if logged.Outcome != want || logged.FromFailureMode != row.failure || logged.HookID != hk.ID ||
						logged.EventID != env.EventID || logged.Reason != reason || logged.HookType != string(ht) ||
						logged.TraceID == nil || *logged.TraceID != "tr-tol" {
						t.Errorf("decision log %+v; want outcome %s fromFailureMode %v eventId %s", logged, want, row.failure, env.EventID)
					}
					if row.failure && logged.Error == "" {
						t.Error("failure logged without its error")
					}
					if row.flaw != (strings.Contains(logged.Error, "; the deny stands") || strings.Contains(logged.Error, "; the ask stands") || strings.HasSuffix(logged.Error, ": read as allow")) {
						t.Errorf("the decision log's error %q, want a flaw noted: %v", logged.Error, row.flaw)
					}
					if strings.HasSuffix(row.name, "over the read limit") &&
						logged.Error != "the answer is over 64 KiB, more than hookd reads of an answer, and no whole answer ends within them" {
						t.Errorf("an answer over the limit logged as %q", logged.Error)
					}
					if row.timeoutMs > 0 && !strings.Contains(logged.Error, "timeout") {
						t.Errorf("timeout logged as %q", logged.Error)
					}
					if warned := len(h.logs.find(slog.LevelWarn, "hookId", hk.ID)) > 0; warned != (row.warn || row.failure || row.flaw) {
						t.Errorf("warning logged = %v, want %v", warned, row.warn || row.failure || row.flaw)
					}
				})
			}
		}
	})
}

func samePtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// chainRecorder answers with a fixed body and appends name to a shared call log.
func chainRecorder(t *testing.T, mu *sync.Mutex, calls *[]string, name, body string) *recorder {
	return newRecorder(t, func(int, *http.Request, []byte) (int, string) {
		mu.Lock()
		*calls = append(*calls, name)
		mu.Unlock()
		return 200, body
	})
}

func TestInterceptChain(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		ctx := context.Background()
		agent := int64(1000)
		next := func() *int64 { agent++; a := agent; return &a }
		toolEvent := func(agentID *int64) Event {
			return Event{HookType: PreToolUse, AgentID: agentID, Context: &PreToolUseContext{ToolName: "transferFunds",
				ToolCallID: "call_abc123", Arguments: `{"amount":50000,"target":"ACC-002"}`}}
		}

		t.Run("order is priority then id", func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			a := next()
			// Created in the order A, B, C; A has the highest priority number, so it runs last.
			hA := h.add(Hook{HookName: "A", HookType: PreToolUse, AgentID: a, Priority: 5,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "A", `{"decision":"allow"}`).srv.URL}})
			hB := h.add(Hook{HookName: "B", HookType: PreToolUse, AgentID: a, Priority: 0,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "B", `{"decision":"allow"}`).srv.URL}})
			hC := h.add(Hook{HookName: "C", HookType: PreToolUse, AgentID: a, Priority: 0,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "C", `{"decision":"allow"}`).srv.URL}})
			hD := h.add(Hook{HookName: "D", HookType: PreToolUse, AgentID: a, Priority: -1,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "D", `{"decision":"allow"}`).srv.URL}})
			dec, err := h.d.Intercept(ctx, toolEvent(a))
			if err != nil || dec.Decision != Allow {
				t.Fatalf("%+v %v", dec, err)
			}
			if got := strings.Join(calls, ","); got != "D,B,C,A" {
				t.Fatalf("call order %s, want D,B,C,A", got)
			}
			log := h.decisions(dec.DecisionID, 4)
			for i, want := range []int64{hD.ID, hB.ID, hC.ID, hA.ID} {
				if log[i].HookID != want || log[i].DecisionID != dec.DecisionID || log[i].Outcome != Allow || log[i].FromFailureMode {
					t.Errorf("log entry %d: %+v, want hook %d allow", i, log[i], want)
				}
			}
		})

		t.Run("deny ends the chain", func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			a := next()
			h.add(Hook{HookName: "first", HookType: PreToolUse, AgentID: a, Priority: 1,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "first", `{"decision":"allow"}`).srv.URL}})
			h.add(Hook{HookName: "denier", HookType: PreToolUse, AgentID: a, Priority: 2,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "denier", `{"decision":"deny","reason":"no"}`).srv.URL}})
			h.add(Hook{HookName: "never", HookType: PreToolUse, AgentID: a, Priority: 3,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "never", `{"decision":"allow"}`).srv.URL}})
			dec, err := h.d.Intercept(ctx, toolEvent(a))
			if err != nil || dec.Decision != Deny || dec.Reason != "no" || dec.ModifiedValue != nil {
				t.Fatalf("%+v %v", dec, err)
			}
			if got := strings.Join(calls, ","); got != "first,denier" {
				t.Fatalf("calls %s; the hook after a deny must not be called", got)
			}
			log := h.decisions(dec.DecisionID, 2)
			if log[0].Outcome != Allow || log[1].Outcome != Deny || log[1].Reason != "no" {
				t.Errorf("log %+v", log)
			}
		})

		t.Run("failureMode DENY ends the chain", func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			a := next()
			down := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 503, "" })
			h.add(Hook{HookName: "down", HookType: PreToolUse, AgentID: a, Priority: 1,
				DispatchConfig: DispatchConfig{URL: down.srv.URL, FailureMode: FailClosed}})
			h.add(Hook{HookName: "never", HookType: PreToolUse, AgentID: a, Priority: 2,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "never", `{"decision":"allow"}`).srv.URL}})
			dec, err := h.d.Intercept(ctx, toolEvent(a))
			if err != nil || dec.Decision != Deny {
				t.Fatalf("%+v %v", dec, err)
			}
			if len(calls) != 0 {
				t.Fatalf("calls after a fail-closed hook: %v", calls)
			}
			if log := h.decisions(dec.DecisionID, 1); !log[0].FromFailureMode || log[0].StatusCode != 503 {
				t.Errorf("log %+v", log)
			}
		})

		t.Run("pre_tool_use modify reaches the next hook", func(t *testing.T) {
			a := next()
			first := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
				return 200, `{"decision":"modify","modifiedValue":"{\"amount\":10000,\"target\":\"ACC-002\"}"}`
			})
			second := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
				return 200, `{"decision":"modify","modifiedValue":{"amount":1,"target":"ACC-002"}}`
			})
			third := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"allow"}` })
			for i, r := range []*recorder{first, second, third} {
				h.add(Hook{HookName: fmt.Sprint("m", i), HookType: PreToolUse, AgentID: a, Priority: i,
					DispatchConfig: DispatchConfig{URL: r.srv.URL}})
			}
			dec, err := h.d.Intercept(ctx, toolEvent(a))
			if err != nil || dec.Decision != Modify || deref(dec.ModifiedValue) != `{"amount":1,"target":"ACC-002"}` {
				t.Fatalf("%+v (%s) %v", dec, deref(dec.ModifiedValue), err)
			}
			args := func(r *recorder) string {
				var c struct {
					Arguments json.RawMessage `json:"arguments"`
				}
				json.Unmarshal(r.envelopes(t)[0].Context, &c)
				return string(c.Arguments)
			}
			if got := args(first); got != `{"amount":50000,"target":"ACC-002"}` {
				t.Errorf("first hook saw %s", got)
			}
			if got := args(second); got != `{"amount":10000,"target":"ACC-002"}` {
				t.Errorf("second hook saw %s; want the first hook's modification, as JSON", got)
			}
			if got := args(third); got != `{"amount":1,"target":"ACC-002"}` {
				t.Errorf("third hook saw %s; want the second hook's modification", got)
			}
			log := h.decisions(dec.DecisionID, 3)
			if log[0].Outcome != Modify || log[1].Outcome != Modify || log[2].Outcome != Allow {
				t.Errorf("log %+v", log)
			}
		})

		t.Run("user_message modify reaches the next hook", func(t *testing.T) {
			a := next()
			first := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
				return 200, `{"decision":"modify","modifiedValue":"帮我查一下 Q4 财报"}`
			})
			second := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{}` })
			h.add(Hook{HookName: "rewrite", HookType: UserMessage, AgentID: a, DispatchConfig: DispatchConfig{URL: first.srv.URL}})
			h.add(Hook{HookName: "read", HookType: UserMessage, AgentID: a, Priority: 1, DispatchConfig: DispatchConfig{URL: second.srv.URL}})
			dec, err := h.d.Intercept(ctx, Event{HookType: UserMessage, AgentID: a, Context: &UserMessageContext{
				UserInput: "帮我查一下 Q3 财报", ChatMode: "single_chat", TriggerSource: TriggerSource{SourceType: SourceHuman}}})
			if err != nil || dec.Decision != Modify || deref(dec.ModifiedValue) != "帮我查一下 Q4 财报" {
				t.Fatalf("%+v %v", dec, err)
			}
			var c UserMessageContext
			json.Unmarshal(second.envelopes(t)[0].Context, &c)
			if c.UserInput != "帮我查一下 Q4 财报" || c.ChatMode != "single_chat" {
				t.Errorf("second hook saw %+v", c)
			}
		})

		t.Run("modify then deny is a deny", func(t *testing.T) {
			a := next()
			first := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
				return 200, `{"decision":"modify","modifiedValue":"{}"}`
			})
			second := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"deny"}` })
			h.add(Hook{HookName: "mod", HookType: PreToolUse, AgentID: a, DispatchConfig: DispatchConfig{URL: first.srv.URL}})
			h.add(Hook{HookName: "den", HookType: PreToolUse, AgentID: a, Priority: 1, DispatchConfig: DispatchConfig{URL: second.srv.URL}})
			dec, err := h.d.Intercept(ctx, toolEvent(a))
			if err != nil || dec.Decision != Deny || dec.ModifiedValue != nil {
				t.Fatalf("%+v %v", dec, err)
			}
		})

		t.Run("pre_tool_use modify that is not JSON", func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			a := next()
			bad := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
				return 200, `{"decision":"modify","modifiedValue":"amount=10000"}`
			})
			hk := h.add(Hook{HookName: "bad", HookType: PreToolUse, AgentID: a, DispatchConfig: DispatchConfig{URL: bad.srv.URL}})
			h.add(Hook{HookName: "never", HookType: PreToolUse, AgentID: a, Priority: 1,
				DispatchConfig: DispatchConfig{URL: chainRecorder(t, &mu, &calls, "never", `{}`).srv.URL}})
			_, err := h.d.Intercept(ctx, toolEvent(a))
			var ime *InvalidModifyError
			if !errors.As(err, &ime) || ime.HookID != hk.ID || ime.HookName != "bad" {
				t.Fatalf("err %v, want *InvalidModifyError for hook %d", err, hk.ID)
			}
			if len(calls) != 0 {
				t.Errorf("chain went on after an invalid modify: %v", calls)
			}
		})

		t.Run("no matching hook allows without a decision log", func(t *testing.T) {
			dec, err := h.d.Intercept(ctx, toolEvent(next()))
			if err != nil || dec.Decision != Allow || dec.DecisionID != "" {
				t.Fatalf("%+v %v", dec, err)
			}
		})

		t.Run("observational types are refused", func(t *testing.T) {
			if _, err := h.d.Intercept(ctx, Event{HookType: PostToolUse}); err == nil {
				t.Fatal("Intercept accepted post_tool_use")
			}
			if _, err := h.d.Observe(ctx, Event{HookType: PreToolUse}); err == nil {
				t.Fatal("Observe accepted pre_tool_use")
			}
		})
	})
}

// TestContextForms: Event.Context may be the context struct, a pointer to it, or raw JSON of its
// shape; toolNameMatch and a modify must work the same for each, since a hook that silently does
// not match is an approval that silently does not happen.
func TestContextForms(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		ctx := context.Background()
		forms := []struct {
			name     string
			pre      any
			post     any
			userMsg  any
			wantArgs string
		}{
			{"pointer", &PreToolUseContext{ToolName: "transferFunds", Arguments: `{"amount":1}`},
				&PostToolUseContext{ToolName: "transferFunds", Arguments: `{"amount":1}`},
				&UserMessageContext{UserInput: "hi"}, `{"amount":1}`},
			{"value", PreToolUseContext{ToolName: "transferFunds", Arguments: `{"amount":1}`},
				PostToolUseContext{ToolName: "transferFunds", Arguments: `{"amount":1}`},
				UserMessageContext{UserInput: "hi"}, `{"amount":1}`},
			{"raw JSON", json.RawMessage(`{"toolName":"transferFunds","toolCallId":"","arguments":{"amount":1}}`),
				json.RawMessage(`{"toolName":"transferFunds","arguments":{"amount":1}}`),
				json.RawMessage(`{"userInput":"hi"}`), `{"amount":1}`},
		}
		for i, f := range forms {
			t.Run(f.name, func(t *testing.T) {
				agent := int64(i + 1)
				first := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
					return 200, `{"decision":"modify","modifiedValue":"{\"amount\":2}"}`
				})
				second := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{}` })
				obs := newRecorder(t, nil)
				h.add(Hook{HookName: "approve", HookType: PreToolUse, AgentID: &agent, ToolNameMatch: "transferFunds|payOrder",
					DispatchConfig: DispatchConfig{URL: first.srv.URL}})
				h.add(Hook{HookName: "after", HookType: PreToolUse, AgentID: &agent, ToolNameMatch: "/^transfer/", Priority: 1,
					DispatchConfig: DispatchConfig{URL: second.srv.URL}})
				h.add(Hook{HookName: "audit", HookType: PostToolUse, AgentID: &agent, ToolNameMatch: "transferFunds",
					DispatchConfig: DispatchConfig{URL: obs.srv.URL}})
				dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, AgentID: &agent, Context: f.pre})
				if err != nil || dec.Decision != Modify || first.count() != 1 || second.count() != 1 {
					t.Fatalf("%+v %v; hooks called %d and %d times, want once each", dec, err, first.count(), second.count())
				}
				var c struct {
					Arguments json.RawMessage `json:"arguments"`
				}
				json.Unmarshal(first.envelopes(t)[0].Context, &c)
				if string(c.Arguments) != f.wantArgs {
					t.Errorf("first hook saw arguments %s", c.Arguments)
				}
				json.Unmarshal(second.envelopes(t)[0].Context, &c)
				if string(c.Arguments) != `{"amount":2}` {
					t.Errorf("second hook saw arguments %s, want the modification", c.Arguments)
				}
				ids, err := h.d.Observe(ctx, Event{HookType: PostToolUse, AgentID: &agent, Context: f.post})
				if err != nil || len(ids) != 1 {
					t.Fatalf("observe: %v %v; want the tool-scoped hook to match", ids, err)
				}
			})
		}
	})
}
