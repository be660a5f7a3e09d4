package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestDecisionRecordIsWhatWasEnforced: each row names its subject and holds the outcome that
// took effect — an invalid modify as the error the caller got, a failed call as its failureMode,
// a breaker short-circuit as the failureMode at an open breaker — and is readable as soon as
// Intercept returns.
func TestDecisionRecordIsWhatWasEnforced(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{Breaker: breaker.Settings{ConsecutiveFailures: 1, OpenFor: time.Minute},
			RecordArguments: true})
		ctx := context.Background()
		session, principal := int64(10001), int64(1001)
		args := `{ "target": "ACC-002", "amount": 50000 }`
		event := func(agent int64) Event {
			return Event{HookType: PreToolUse, AgentID: &agent, SessionID: &session, PrincipalID: &principal, TraceID: "tr-1",
				Context: &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_1", Arguments: Value(args)}}
		}

		t.Run("invalid modify", func(t *testing.T) {
			rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
				return 200, `{"decision":"modify","modifiedValue":"not json","reason":"mask"}`
			})
			agent := int64(1)
			hk := h.add(Hook{HookName: "masker", HookType: PreToolUse, AgentID: &agent, Priority: 4,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
			_, err := h.d.Intercept(ctx, event(agent))
			var bad *InvalidModifyError
			if !errors.As(err, &bad) {
				t.Fatalf("err = %v, want InvalidModifyError", err)
			}
			rows, _ := db.ListDecisions(ctx, storage.DecisionFilter{HookID: hk.ID})
			if len(rows) != 1 {
				t.Fatalf("%d rows for the hook, want 1", len(rows))
			}
			r := rows[0]
			if r.Outcome != storage.OutcomeError || !strings.Contains(r.Error, "not valid JSON") || r.FromFailureMode {
				t.Fatalf("invalid modify recorded as %q (%q), want error", r.Outcome, r.Error)
			}
			if r.ModifiedHash != sha256Hex([]byte("not json")) {
				t.Errorf("modifiedHash %q", r.ModifiedHash)
			}
			canonical := `{"amount":50000,"target":"ACC-002"}`
			if r.ToolName != "transferFunds" || r.ToolCallID != "call_1" || r.SubjectHash != sha256Hex([]byte(canonical)) ||
				r.Subject == nil || *r.Subject != canonical {
				t.Errorf("subject: %q %q %q %v", r.ToolName, r.ToolCallID, r.SubjectHash, r.Subject)
			}
			if r.HookName != "masker" || r.HookPriority != 4 || *r.SessionID != session || *r.PrincipalID != principal ||
				*r.AgentID != agent || *r.TraceID != "tr-1" || r.BreakerState != breaker.StateClosed || r.StatusCode != 200 {
				t.Errorf("row: %+v", r)
			}
		})

		t.Run("failureMode fallback", func(t *testing.T) {
			rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 500, `oops` })
			agent := int64(2)
			h.add(Hook{HookName: "closed", HookType: PreToolUse, AgentID: &agent,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL, FailureMode: FailClosed}})
			dec, err := h.d.Intercept(ctx, event(agent))
			if err != nil || dec.Decision != Deny {
				t.Fatalf("%+v %v", dec, err)
			}
			r := h.decisions(dec.DecisionID, 1)[0]
			if r.Outcome != Deny || !r.FromFailureMode || r.StatusCode != 500 || !strings.Contains(r.Error, "HTTP 500") {
				t.Fatalf("fallback recorded as %+v", r)
			}
		})

		t.Run("breaker short-circuit", func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + l.Addr().String() + "/hook"
			l.Close() // nothing listens: the first call is refused and opens the breaker
			agent := int64(3)
			h.add(Hook{HookName: "gone", HookType: PreToolUse, AgentID: &agent,
				DispatchConfig: DispatchConfig{URL: url, FailureMode: FailClosed}})
			first, _ := h.d.Intercept(ctx, event(agent))
			if r := h.decisions(first.DecisionID, 1)[0]; r.BreakerState != breaker.StateClosed || !r.FromFailureMode {
				t.Fatalf("first call recorded as %+v", r)
			}
			dec, err := h.d.Intercept(ctx, event(agent))
			if err != nil || dec.Decision != Deny {
				t.Fatalf("%+v %v", dec, err)
			}
			r := h.decisions(dec.DecisionID, 1)[0]
			if r.Outcome != Deny || !r.FromFailureMode || r.BreakerState != breaker.StateOpen || r.StatusCode != 0 ||
				!strings.Contains(r.Error, "open") {
				t.Fatalf("short-circuit recorded as %+v", r)
			}
		})

		// A caller that enforces something else than the chain's verdict (nobody to ask): the
		// rows that answered the verdict record what took effect; the others stay as answered.
		t.Run("enforced by the caller", func(t *testing.T) {
			asks := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"ask","reason":"review"}` })
			allows := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"allow"}` })
			agent := int64(5)
			h.add(Hook{HookName: "asker", HookType: PreToolUse, AgentID: &agent, Priority: 1, DispatchConfig: DispatchConfig{URL: asks.srv.URL}})
			h.add(Hook{HookName: "allower", HookType: PreToolUse, AgentID: &agent, Priority: 2, DispatchConfig: DispatchConfig{URL: allows.srv.URL}})
			ev := event(agent)
			var seen Decision
			ev.Enforce = func(d Decision) Decision {
				seen = d
				if d.Decision == Ask {
					return Decision{Decision: Deny, Reason: d.Reason + " (nobody can be asked here)", DecisionID: d.DecisionID}
				}
				return d
			}
			dec, err := h.d.Intercept(ctx, ev)
			if err != nil || dec.Decision != Deny || dec.Reason != "review (nobody can be asked here)" || seen.Decision != Ask {
				t.Fatalf("%+v %v (Enforce saw %+v)", dec, err, seen)
			}
			rows := h.decisions(dec.DecisionID, 2)
			if rows[0].Outcome != Deny || rows[0].Reason != dec.Reason || rows[1].Outcome != Allow {
				t.Fatalf("rows %s %q, %s", rows[0].Outcome, rows[0].Reason, rows[1].Outcome)
			}
		})

		// A caller that words a blank reason for the person it tells (a coding agent drops a
		// block without one): the row that gave the verdict records the words it was told.
		t.Run("reworded by the caller", func(t *testing.T) {
			for _, answer := range []string{Deny, Ask} {
				rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
					return 200, `{"decision":"` + answer + `","reason":"  "}`
				})
				agent := int64(100)
				if answer == Ask {
					agent++
				}
				h.add(Hook{HookName: "blank " + answer, HookType: PreToolUse, AgentID: &agent, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
				ev := event(agent)
				ev.Enforce = func(d Decision) Decision {
					if strings.TrimSpace(d.Reason) == "" {
						d.Reason = "hookd: " + d.Decision
					}
					return d
				}
				dec, err := h.d.Intercept(ctx, ev)
				if err != nil || dec.Decision != answer || dec.Reason != "hookd: "+answer {
					t.Fatalf("%s: %+v %v", answer, dec, err)
				}
				if r := h.decisions(dec.DecisionID, 1)[0]; r.Outcome != answer || r.Reason != dec.Reason {
					t.Fatalf("%s: row %s %q, the caller was told %q", answer, r.Outcome, r.Reason, dec.Reason)
				}
			}
		})

		t.Run("user input is hashed", func(t *testing.T) {
			rec := newRecorder(t, nil)
			agent := int64(4)
			h.add(Hook{HookName: "input", HookType: UserMessage, AgentID: &agent, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
			dec, err := h.d.Intercept(ctx, Event{HookType: UserMessage, AgentID: &agent, Context: &UserMessageContext{UserInput: "帮我查一下"}})
			if err != nil {
				t.Fatal(err)
			}
			if r := h.decisions(dec.DecisionID, 1)[0]; r.SubjectHash != sha256Hex([]byte("帮我查一下")) || r.Outcome != Allow {
				t.Fatalf("%+v", r)
			}
		})

		if rep, err := db.VerifyDecisions(ctx); err != nil || !rep.OK || rep.Checked == 0 {
			t.Fatalf("chain: %+v %v", rep, err)
		}
	})
}

// TestDecisionsShareCommits: concurrent sync decisions are each on the record when they return,
// and the chain they form verifies.
func TestDecisionsShareCommits(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		rec := newRecorder(t, nil)
		h.add(Hook{HookName: "all", HookType: PreToolUse, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 64 {
			wg.Go(func() {
				dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: "t", Arguments: "{}"}})
				if err == nil {
					var rows []storage.Decision
					rows, err = db.ListDecisions(ctx, storage.DecisionFilter{DecisionID: dec.DecisionID})
					if err == nil && len(rows) != 1 {
						err = errors.New("decision " + dec.DecisionID + " returned before it was recorded")
					}
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if rep, err := db.VerifyDecisions(ctx); err != nil || !rep.OK || rep.Checked != 64 {
			t.Fatalf("chain: %+v %v", rep, err)
		}
	})
}

// TestBatchedDecisions: with durability batched the rows follow the decision, and a stop writes
// what is queued.
func TestBatchedDecisions(t *testing.T) {
	db := storagetest.SQLite(t)
	h := newHarness(t, db, Settings{DecisionDurability: DurabilityBatched})
	rec := newRecorder(t, nil)
	h.add(Hook{HookName: "all", HookType: PreToolUse, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
	dec, err := h.d.Intercept(context.Background(), Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	h.d.Stop(context.Background())
	if rows, _ := db.ListDecisions(context.Background(), storage.DecisionFilter{DecisionID: dec.DecisionID}); len(rows) != 1 {
		t.Fatalf("%d rows after stop, want 1", len(rows))
	}
}

// TestSubjectsInBothDurabilities: each row names the subject its hook saw — the arguments as the
// caller sent them before a modify, as modified after it — whether the caller computed the digest
// (sync) or the writer did (batched).
func TestSubjectsInBothDurabilities(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		for _, durability := range []string{DurabilitySync, DurabilityBatched} {
			t.Run(durability, func(t *testing.T) {
				h := newHarness(t, db, Settings{DecisionDurability: durability, RecordArguments: true})
				agent := int64(len(durability)) // a hook set of its own per durability
				masker := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
					return 200, `{"decision":"modify","modifiedValue":"{\"target\":\"ACC-002\",\"amount\":1}"}`
				})
				h.add(Hook{HookName: "masker", HookType: PreToolUse, AgentID: &agent, Priority: 1,
					DispatchConfig: DispatchConfig{URL: masker.srv.URL}})
				h.add(Hook{HookName: "after", HookType: PreToolUse, AgentID: &agent, Priority: 2,
					DispatchConfig: DispatchConfig{URL: newRecorder(t, nil).srv.URL}})
				h.add(Hook{HookName: "input", HookType: UserMessage, AgentID: &agent,
					DispatchConfig: DispatchConfig{URL: newRecorder(t, nil).srv.URL}})
				ctx := context.Background()
				tool, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, AgentID: &agent,
					Context: &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "call_1", Arguments: `{ "target": "ACC-009", "amount": 50000 }`}})
				if err != nil || tool.Decision != Modify {
					t.Fatalf("%+v %v", tool, err)
				}
				input, err := h.d.Intercept(ctx, Event{HookType: UserMessage, AgentID: &agent, Context: &UserMessageContext{UserInput: "帮我查一下"}})
				if err != nil {
					t.Fatal(err)
				}
				h.d.Stop(ctx) // batched rows are written by then
				want := []string{`{"amount":50000,"target":"ACC-009"}`, `{"amount":1,"target":"ACC-002"}`}
				for i, r := range h.decisions(tool.DecisionID, 2) {
					if r.SubjectHash != sha256Hex([]byte(want[i])) || r.Subject == nil || *r.Subject != want[i] || r.ToolName != "transferFunds" {
						t.Errorf("row %d (%s): subject %v, hash %s, want %s", i, r.HookName, r.Subject, r.SubjectHash, want[i])
					}
				}
				if r := h.decisions(input.DecisionID, 1)[0]; r.SubjectHash != sha256Hex([]byte("帮我查一下")) || r.Subject == nil || *r.Subject != "帮我查一下" {
					t.Errorf("user input row: %+v", r)
				}
			})
		}
	})
}

// Arguments hash alike however they were ordered and spaced, and keep their meaning.
func TestCanonicalJSONSortsAndCompacts(t *testing.T) {
	for in, want := range map[string]string{
		`{ "target": "ACC-002", "amount": 50000 }`: `{"amount":50000,"target":"ACC-002"}`,
		`{"b":[1, {"d":1,"c":"x\"}"}], "a":{}}`:    `{"a":{},"b":[1,{"c":"x\"}","d":1}]}`,
		`[]`:                                       `[]`,
		` "s" `:                                    `"s"`,
		`{"amount":50000,"target":"ACC-002","memo":"q"}`: `{"amount":50000,"memo":"q","target":"ACC-002"}`,
		`not json`: `not json`,
		`{"a":true,"b":null,"c":-1.5e3,"d":[true , false]}`: `{"a":true,"b":null,"c":-1.5e3,"d":[true,false]}`,
	} {
		got := canonicalJSON([]byte(in))
		if string(got) != want {
			t.Errorf("canonicalJSON(%s) = %s, want %s", in, got, want)
		}
		if json.Valid([]byte(in)) {
			var a, b any
			json.Unmarshal([]byte(in), &a)
			json.Unmarshal(got, &b)
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			if !bytes.Equal(x, y) {
				t.Errorf("%s changed meaning: %s", in, got)
			}
		}
	}
}

// refusedWrites is a batched decision log on a PostgreSQL role made read-only, with a hook that
// denies every call (denied): each decision is acted on, and its row cannot be written.
func refusedWrites(t *testing.T) (*storagetest.PostgresReadOnly, *storage.DB, *harness) {
	t.Helper()
	p := storagetest.PostgresWithRole(t)
	db, err := storage.Open(context.Background(), p.URL, storage.Options{Key: storagetest.Key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := newHarness(t, db, Settings{DecisionDurability: DurabilityBatched})
	rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"deny","reason":"no"}` })
	h.add(Hook{HookName: "deny", HookType: PreToolUse, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
	p.SetReadOnly(true)
	return p, db, h
}

// deniedCall is a call the hook of refusedWrites denies.
func deniedCall() Event {
	return Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: "x", ToolCallID: "c", Arguments: `{}`}}
}

// TestBatchedDecisionsOutlastAWriteBlip: a batched decision is acted on before its row is
// written, so a commit that fails on a passing fault (the database refusing writes for a moment)
// is tried again, and the row lands once writes are possible again.
func TestBatchedDecisionsOutlastAWriteBlip(t *testing.T) {
	p, db, h := refusedWrites(t)
	dec, err := h.d.Intercept(context.Background(), deniedCall())
	if err != nil || dec.Decision != Deny {
		t.Fatalf("%+v %v", dec, err)
	}
	h.logs.await(t, "write failed; trying again")
	p.SetReadOnly(false)
	h.d.Stop(context.Background()) // its writer ends with the rows it holds
	if rows, err := db.ListDecisions(context.Background(), storage.DecisionFilter{DecisionID: dec.DecisionID}); err != nil || len(rows) != 1 {
		t.Fatalf("the acted-on decision's row: %d %v", len(rows), err)
	}
}

// TestStopEndsWhileWritesAreRefused: rows nobody waits for are retried in rounds a cycle, not a
// ladder each, and a Stop whose deadline passes ends the rounds: with the database refusing every
// write, a shutdown does not wait 1.5 s per queued decision.
func TestStopEndsWhileWritesAreRefused(t *testing.T) {
	_, _, h := refusedWrites(t)
	for range 8 {
		if dec, err := h.d.Intercept(context.Background(), deniedCall()); err != nil || dec.Decision != Deny {
			t.Fatalf("%+v %v", dec, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan struct{})
	go func() { h.d.Stop(ctx); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(8 * time.Second): // eight ladders would be 12 s; one is 1.5 s
		t.Fatal("Stop is held by retries of rows the database keeps refusing")
	}
}
