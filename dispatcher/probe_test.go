package dispatcher

import (
	"context"
	"errors"
	"net/http"
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
