package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestProbeDecidesAsDispatch: a hook's test call answers what a dispatch of the same sample event
// enforces, the tolerance rules included (a modify without modifiedValue is an allow, a modify
// that is not JSON arguments is refused, a failure is the failureMode).
func TestProbeDecidesAsDispatch(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		ctx := context.Background()
		for i, tc := range []struct {
			name, answer string
			status       int
			hookType     HookType
			mode         string
			want         string
		}{
			{"allow", `{"decision":"allow"}`, 200, PreToolUse, FailOpen, Allow},
			{"deny", `{"decision":"deny","reason":"no"}`, 200, PreToolUse, FailOpen, Deny},
			{"modify", `{"decision":"modify","modifiedValue":"{\"amount\":1}"}`, 200, PreToolUse, FailOpen, Modify},
			{"modify without value", `{"decision":"modify"}`, 200, PreToolUse, FailClosed, Allow},
			{"modify not JSON", `{"decision":"modify","modifiedValue":"not json"}`, 200, PreToolUse, FailOpen, storage.OutcomeError},
			{"modify user input", `{"decision":"modify","modifiedValue":"not json"}`, 200, UserMessage, FailOpen, Modify},
			{"500 fail closed", `{}`, 500, PreToolUse, FailClosed, Deny},
			{"unparsable fail open", `nope`, 200, PreScheduledTask, FailOpen, Allow},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return tc.status, tc.answer })
				agent := int64(100 + i)
				hk := h.add(Hook{HookName: tc.name, HookType: tc.hookType, AgentID: &agent,
					DispatchConfig: DispatchConfig{URL: rec.srv.URL, FailureMode: tc.mode}})
				probe, err := h.d.Probe(ctx, hk.ID)
				if err != nil || probe.Decision == nil {
					t.Fatalf("probe: %+v %v", probe, err)
				}
				dec, err := h.d.Intercept(ctx, Event{HookType: tc.hookType, AgentID: &agent, Context: SampleContext(tc.hookType)})
				dispatched := dec.Decision
				if bad := (*InvalidModifyError)(nil); errors.As(err, &bad) {
					dispatched = storage.OutcomeError
				} else if err != nil {
					t.Fatal(err)
				}
				if *probe.Decision != tc.want || dispatched != tc.want {
					t.Fatalf("probe says %q, dispatch enforced %q, want both %q", *probe.Decision, dispatched, tc.want)
				}
				if rows, _ := db.ListDecisions(ctx, storage.DecisionFilter{HookID: hk.ID}); len(rows) != 1 || rows[0].Outcome != tc.want {
					t.Fatalf("decision log: %+v; want the dispatch once, as enforced, and the probe not at all", rows)
				}
			})
		}
	})
}

// A tool hook's test call is about a tool the hook selects: a hook on "authTool|other" whose
// receiver denies authTool is probed with authTool and answers deny, as a dispatch of authTool
// does (the source document's sample tool, transferFunds, would never reach it). For a regex the
// sample misses no tool can be named: the sample is sent, and the note says a dispatch of it
// would not ask the hook.
func TestProbeAsksAboutAToolTheHookSelects(t *testing.T) {
	h := newHarness(t, storagetest.SQLite(t), Settings{})
	ctx := context.Background()
	rec := newRecorder(t, func(_ int, _ *http.Request, body []byte) (int, string) {
		var env struct {
			Context struct{ ToolName string } `json:"context"`
		}
		json.Unmarshal(body, &env)
		if env.Context.ToolName == "authTool" {
			return 200, `{"decision":"deny","reason":"authTool is not allowed"}`
		}
		return 200, `{"decision":"allow"}`
	})
	listed := h.add(Hook{HookName: "listed", HookType: PreToolUse, ToolNameMatch: "authTool|other",
		DispatchConfig: DispatchConfig{URL: rec.srv.URL, FailureMode: FailOpen}})
	probe, err := h.d.Probe(ctx, listed.ID)
	if err != nil || probe.Decision == nil || *probe.Decision != Deny || probe.Note != nil {
		t.Fatalf("probe of a listed tool: %+v %v", probe, err)
	}
	dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: "authTool"}})
	if err != nil || dec.Decision != Deny {
		t.Fatalf("dispatch of authTool: %+v %v", dec, err)
	}

	// A disabled hook's test call says no dispatch asks it: the dispatch answers allow, with no
	// decision of it.
	off := false
	listed.Enabled = &off
	if _, err := h.reg.Replace(ctx, listed.ID, listed); err != nil {
		t.Fatal(err)
	}
	probe, err = h.d.Probe(ctx, listed.ID)
	if err != nil || probe.Note == nil || !strings.Contains(*probe.Note, "the hook is disabled, so no dispatch asks it") {
		t.Fatalf("probe of a disabled hook: %+v %v", probe, err)
	}
	if dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, Context: &PreToolUseContext{ToolName: "authTool"}}); err != nil || dec.Decision != Allow {
		t.Fatalf("dispatch of authTool, its hook disabled: %+v %v", dec, err)
	}

	regex := h.add(Hook{HookName: "regex", HookType: PostToolUse, ToolNameMatch: "/^auth/",
		DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
	probe, err = h.d.Probe(ctx, regex.ID)
	if err != nil || probe.Note == nil || !strings.Contains(*probe.Note, `"queryOrder" is not one toolNameMatch "/^auth/" selects`) {
		t.Fatalf("probe of a regex the sample misses: %+v %v", probe, err)
	}
}

// TestProbeOfAHookNotYetLoaded: a hook made on another replica can be tested here at once, before
// this replica's registry would have loaded it (it was a 500).
func TestProbeOfAHookNotYetLoaded(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"deny","reason":"checked"}` })
		id := createElsewhere(t, db, Hook{HookName: "fresh", HookType: UserMessage, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		res, err := h.d.Probe(context.Background(), id)
		if err != nil || res.Decision == nil || *res.Decision != Deny || res.Reason == nil || *res.Reason != "checked" || rec.count() != 1 {
			t.Fatalf("%+v %v, %d requests", res, err, rec.count())
		}
		if _, err := h.d.Probe(context.Background(), id+100); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a hook that is nowhere: %v", err)
		}
	})
}
