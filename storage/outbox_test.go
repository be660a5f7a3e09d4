package storage_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

func enqueue(t *testing.T, db *storage.DB, n int) []storage.Delivery {
	t.Helper()
	ds := make([]storage.Delivery, n)
	for i := range ds {
		ds[i] = storage.Delivery{EventID: storage.NewTSIDString(), HookID: 1, HookType: "post_tool_use", HookName: "h",
			OccurredAt: time.Now(), Context: []byte(`{}`)}
	}
	if err := db.EnqueueDeliveries(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestDeliveryIDsNeverReused: a deleted delivery's id is not given to a new one, though it was the
// largest.
func TestDeliveryIDsNeverReused(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		ds := enqueue(t, db, 7)
		for i := 1; i < len(ds); i++ {
			if ds[i].ID <= ds[i-1].ID {
				t.Fatalf("ids not increasing: %d then %d", ds[i-1].ID, ds[i].ID)
			}
		}
		last := ds[len(ds)-1]
		if got, err := db.GetDelivery(ctx, last.ID); err != nil || got.EventID != last.EventID {
			t.Fatalf("delivery %d: %+v %v, want event %s", last.ID, got, err, last.EventID)
		}
		if err := db.DeleteDelivery(ctx, last.ID); err != nil {
			t.Fatal(err)
		}
		if next := enqueue(t, db, 3); next[0].ID <= last.ID {
			t.Fatalf("new delivery got id %d, the deleted %d's or below", next[0].ID, last.ID)
		}
	})
}

func TestOutboxClaimCompleteRescue(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		ds := enqueue(t, db, 10)
		if ds[9].ID == 0 {
			t.Fatal("ids not set")
		}
		now := time.Now()
		a, err := db.ClaimDeliveries(ctx, now, 4, time.Minute)
		if err != nil || len(a) != 4 {
			t.Fatalf("claim: %d %v", len(a), err)
		}
		b, _ := db.ClaimDeliveries(ctx, now, 100, time.Minute)
		if len(b) != 6 {
			t.Fatalf("second claim got %d, want the other 6", len(b))
		}
		if c, _ := db.ClaimDeliveries(ctx, now, 100, time.Minute); len(c) != 0 {
			t.Fatalf("claimed rows claimed again: %d", len(c))
		}
		// Complete a: one delivered, one retried later, one dead, one failed.
		outs := []storage.Outcome{
			{Delivery: a[0], Status: storage.StatusDelivered, Attempts: 1, StatusCode: 200,
				Attempt: &storage.Attempt{Attempt: 1, DispatchedAt: now, StatusCode: 200, LatencyMs: 3}},
			{Delivery: a[1], Status: storage.StatusPending, Attempts: 1, NextAttemptAt: now.Add(time.Hour), StatusCode: 500, Error: "HTTP 500",
				Attempt: &storage.Attempt{Attempt: 1, DispatchedAt: now, StatusCode: 500, ErrorClass: "http_5xx", ResponseBody: "oops"}},
			{Delivery: a[2], Status: storage.StatusDead, Attempts: 10, Error: "spent"},
			{Delivery: a[3], Status: storage.StatusFailed, Attempts: 1, StatusCode: 404},
		}
		if err := db.CompleteDeliveries(ctx, outs); err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{storage.StatusDelivered, storage.StatusPending, storage.StatusDead, storage.StatusFailed} {
			got, _ := db.GetDelivery(ctx, a[i].ID)
			if got.Status != want || got.Attempts != outs[i].Attempts || got.LastStatusCode != outs[i].StatusCode {
				t.Fatalf("delivery %d: %+v, want %s", i, got, want)
			}
		}
		att, _ := db.Attempts(ctx, []int64{a[0].ID, a[1].ID})
		if len(att[a[0].ID]) != 1 || att[a[1].ID][0].ResponseBody != "oops" || att[a[1].ID][0].ErrorClass != "http_5xx" {
			t.Fatalf("attempts: %+v", att)
		}
		// The retried one is not due yet.
		if due, ok, _ := db.NextDue(ctx); !ok || due.Before(now.Add(59*time.Minute)) {
			t.Fatalf("next due %v %v", due, ok)
		}
		// b's worker "dies": after the lease the rescuer returns its rows; a late completion of
		// the old claim is then ignored.
		n, err := db.RescueDeliveries(ctx, now.Add(2*time.Minute))
		if err != nil || n != 6 {
			t.Fatalf("rescued %d %v", n, err)
		}
		c, _ := db.ClaimDeliveries(ctx, now.Add(3*time.Minute), 100, time.Minute)
		if len(c) != 6 {
			t.Fatalf("reclaimed %d", len(c))
		}
		stale := storage.Outcome{Delivery: b[0], Status: storage.StatusDead, Attempts: 9}
		if err := db.CompleteDeliveries(ctx, []storage.Outcome{stale}); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.GetDelivery(ctx, b[0].ID); got.Status != storage.StatusDelivering {
			t.Fatalf("stale completion applied: %+v", got)
		}
		// Listing and stats.
		list, _ := db.ListDeliveries(ctx, storage.DeliveryFilter{Status: storage.StatusDead})
		if len(list) != 1 || list[0].ID != a[2].ID {
			t.Fatalf("list dead: %+v", list)
		}
		list, _ = db.ListDeliveries(ctx, storage.DeliveryFilter{EventID: ds[5].EventID})
		if len(list) != 1 {
			t.Fatalf("list by event: %+v", list)
		}
		depth, _, err := db.OutboxStats(ctx)
		if err != nil || depth != 7 {
			t.Fatalf("depth %d %v", depth, err)
		}
		// Redeliver claims a final row, but not one in flight.
		if _, err := db.ClaimDelivery(ctx, a[2].ID, now, time.Minute); err != nil {
			t.Fatalf("claim dead row: %v", err)
		}
		if _, err := db.ClaimDelivery(ctx, a[2].ID, now, time.Minute); err != storage.ErrBusy {
			t.Fatalf("claim in-flight row: %v", err)
		}
		if _, err := db.ClaimDelivery(ctx, 999999, now, time.Minute); err != storage.ErrNotFound {
			t.Fatalf("claim missing row: %v", err)
		}
	})
}

// Claimers running at once never get the same row.
func TestOutboxConcurrentClaims(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		enqueue(t, db, 1000)
		var mu sync.Mutex
		got := map[int64]int{}
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					rows, err := db.ClaimDeliveries(context.Background(), time.Now(), 37, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if len(rows) == 0 {
						return
					}
					mu.Lock()
					for _, r := range rows {
						got[r.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(got) != 1000 {
			t.Fatalf("claimed %d distinct rows", len(got))
		}
		for id, n := range got {
			if n != 1 {
				t.Fatalf("row %d claimed %d times", id, n)
			}
		}
	})
}

func TestDecisionLog(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		sid := int64(7)
		var ds []storage.Decision
		for i := 0; i < 5; i++ {
			ds = append(ds, storage.Decision{DecisionID: fmt.Sprint("d", i%2), EventID: storage.NewTSIDString(), HookID: 1,
				HookName: "h", HookType: "pre_tool_use", SessionID: &sid, Outcome: "deny", FromFailureMode: i == 3, CreatedAt: time.Now()})
		}
		ds[4].HookType, ds[4].SessionID = "user_message", nil
		if err := db.InsertDecisions(ctx, ds); err != nil {
			t.Fatal(err)
		}
		got, _ := db.ListDecisions(ctx, storage.DecisionFilter{HookType: "pre_tool_use", SessionID: &sid})
		if len(got) != 4 || got[0].ID < got[1].ID || !got[0].FromFailureMode {
			t.Fatalf("filtered decisions: %+v", got)
		}
		got, _ = db.ListDecisions(ctx, storage.DecisionFilter{DecisionID: "d0"})
		if len(got) != 3 {
			t.Fatalf("by decision id: %d", len(got))
		}

		// More than one statement's worth in one call, every field set, read back whole.
		trace := "trace-1"
		at := time.Now().UTC().Truncate(time.Millisecond)
		many := make([]storage.Decision, 450)
		for i := range many {
			many[i] = storage.Decision{DecisionID: "bulk", EventID: fmt.Sprint("evt-", i), HookID: int64(i), HookName: "审计",
				HookType: "post_llm_call", SessionID: &sid, TraceID: &trace, Outcome: "modify", Reason: "改写 it's \"quoted\"",
				FromFailureMode: i%2 == 1, StatusCode: 200 + i%3, Error: "e" + fmt.Sprint(i), LatencyMs: int64(i * 7), CreatedAt: at}
		}
		if err := db.InsertDecisions(ctx, many); err != nil {
			t.Fatal(err)
		}
		got, err := db.ListDecisions(ctx, storage.DecisionFilter{DecisionID: "bulk", Limit: 1000})
		if err != nil || len(got) != len(many) {
			t.Fatalf("bulk: %d rows, %v", len(got), err)
		}
		for _, g := range got {
			i := int(g.HookID)
			w := many[i]
			if g.ID == 0 || g.EventID != w.EventID || g.HookName != w.HookName || g.HookType != w.HookType || *g.SessionID != sid ||
				g.TraceID == nil || *g.TraceID != trace || g.Outcome != w.Outcome || g.Reason != w.Reason ||
				g.FromFailureMode != w.FromFailureMode || g.StatusCode != w.StatusCode || g.Error != w.Error ||
				g.LatencyMs != w.LatencyMs || !g.CreatedAt.Equal(at) {
				t.Fatalf("decision %d: got %+v, want %+v", i, g, w)
			}
		}
	})
}
