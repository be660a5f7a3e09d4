package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestTextNotUTF8: a receiver's binary answer and a NUL in a reason or a tool name, which
// PostgreSQL's text refuses, are kept with U+FFFD in their place on either database, so that
// one such value cannot fail the commit it shares with other callers' rows; the chain verifies.
func TestTextNotUTF8(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		enqueue(t, db, 1)
		now := time.Now()
		claimed, err := db.ClaimDeliveries(ctx, now, 1, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %d %v", len(claimed), err)
		}
		trace := "tr-\x00"
		b := &storage.WriteBatch{
			Outcomes: []storage.Outcome{{Delivery: claimed[0], Status: storage.StatusDelivered, Attempts: 1, StatusCode: 200,
				Attempt: &storage.Attempt{Attempt: 1, DispatchedAt: now, StatusCode: 200, ResponseBody: "\xff\x00bin"}}},
			Decisions: []storage.Decision{
				{DecisionID: "d1", EventID: storage.NewTSIDString(), HookName: "h", HookType: "pre_tool_use", ToolName: "tool\x00",
					TraceID: &trace, Outcome: "deny", Reason: "no\x00 \xc3(", CreatedAt: now},
				{DecisionID: "d2", EventID: storage.NewTSIDString(), HookName: "h", HookType: "pre_tool_use", ToolName: "fine",
					Outcome: "allow", CreatedAt: now}},
		}
		if err := db.Commit(ctx, b); err != nil {
			t.Fatalf("commit: %v", err)
		}
		att, _ := db.Attempts(ctx, []int64{claimed[0].ID})
		if got := att[claimed[0].ID]; len(got) != 1 || got[0].ResponseBody != "\uFFFD\uFFFDbin" {
			t.Fatalf("attempts %+v", got)
		}
		rows, err := db.ListDecisions(ctx, storage.DecisionFilter{DecisionID: "d1"})
		if err != nil || len(rows) != 1 || rows[0].ToolName != "tool\uFFFD" || rows[0].Reason != "no\uFFFD \uFFFD(" || *rows[0].TraceID != "tr-\uFFFD" {
			t.Fatalf("decision %+v %v", rows, err)
		}
		if rep, err := db.VerifyDecisions(ctx); err != nil || !rep.OK || rep.Checked != 2 {
			t.Fatalf("chain %+v %v", rep, err)
		}
	})
}
