package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestRedeliverWhileThisReplicaSeesTheHookDisabled: the claim reads the hook's state in the
// database, the attempt this replica's registry; when the registry has the hook disabled (it was
// disabled between the two), the redelivery is refused as the claim would have refused it, with
// nothing sent, and the row goes back to pending rather than reporting a success.
func TestRedeliverWhileThisReplicaSeesTheHookDisabled(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		reg, err := NewRegistry(ctx, db, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		d := New(db, reg, slog.New(&logCapture{}), Settings{Version: "test"}) // not started: no worker races the test
		t.Cleanup(func() { d.Stop(context.Background()) })
		h := &harness{t: t, db: db, reg: reg, d: d}
		rec := newRecorder(t, nil)
		a := h.add(Hook{HookName: "audit", HookType: PostToolUse, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		row := h.delivery(h.observeOne(Event{HookType: PostToolUse, Context: &PostToolUseContext{ToolName: "t"}}))

		// Disabled through the registry, then enabled in the database alone: the claim passes,
		// the attempt sees the hook disabled.
		a.Enabled = ptr(false)
		if _, err := reg.Replace(ctx, a.ID, a); err != nil {
			t.Fatal(err)
		}
		stored, err := db.GetHook(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored.Enabled = true
		if err := db.UpdateHook(ctx, &stored); err != nil {
			t.Fatal(err)
		}

		_, err = d.Redeliver(ctx, row.ID)
		var refused *RedeliverError
		if !errors.As(err, &refused) || !strings.Contains(refused.Msg, fmt.Sprintf(`hook %d ("audit") is disabled`, a.ID)) {
			t.Fatalf("redeliver: %v, want a *RedeliverError naming the disabled hook", err)
		}
		if n := rec.count(); n != 0 {
			t.Fatalf("%d requests reached the disabled hook's receiver", n)
		}
		if got := h.delivery(row.EventID); got.Status != storage.StatusPending || got.Attempts != 0 {
			t.Fatalf("after the refused redelivery: %s, %d attempts, want pending with none", got.Status, got.Attempts)
		}
	})
}

// createElsewhere stores hk as another replica does, not through this process's registry, and
// returns its id.
func createElsewhere(t *testing.T, db *storage.DB, hk Hook) int64 {
	t.Helper()
	if err := hk.Normalize(); err != nil {
		t.Fatal(err)
	}
	row, err := toRow(&hk)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateHook(context.Background(), &row); err != nil {
		t.Fatal(err)
	}
	return row.ID
}

// TestDeliveryOfAHookNotYetLoaded: a due delivery of a hook this process has not loaded yet (made
// by another replica, whose change reaches this one within its refresh) waits for it, its
// attempts unspent, and goes out once the hook is loaded; only a hook the database no longer has
// ends its deliveries as dead.
func TestDeliveryOfAHookNotYetLoaded(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		h := newHarness(t, db, Settings{})
		rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 204, "" })
		hookID := createElsewhere(t, db, Hook{HookName: "fresh", HookType: PostLLMCall, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		eventID := storage.NewTSIDString()
		if err := db.EnqueueDeliveries(ctx, []storage.Delivery{{EventID: eventID, HookID: hookID, HookType: string(PostLLMCall),
			HookName: "fresh", OccurredAt: time.Now(), Context: []byte(`{"model":"m"}`)}}); err != nil {
			t.Fatal(err)
		}
		h.d.poke()
		// Claimed and put back (or ended): the row was written since it was queued.
		d := h.waitDelivery(eventID, 10*time.Second, "handled", func(d storage.Delivery) bool {
			return d.Status != storage.StatusDelivering && d.UpdatedAt.After(d.CreatedAt)
		})
		if d.Status == storage.StatusDead || d.Attempts != 0 || rec.count() != 0 {
			t.Fatalf("before the hook was loaded: %s after %d attempts (%s), %d requests", d.Status, d.Attempts, d.LastError, rec.count())
		}
		if err := h.reg.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		d = h.waitDelivery(eventID, 10*time.Second, "delivered", func(d storage.Delivery) bool {
			return d.Status != storage.StatusPending && d.Status != storage.StatusDelivering
		})
		if d.Status != storage.StatusDelivered || d.Attempts != 1 || rec.count() != 1 {
			t.Fatalf("once loaded: %s after %d attempts, %d requests", d.Status, d.Attempts, rec.count())
		}
	})
}

// TestQueuedDeliveryOfANarrowedHook: a hook changed so that it no longer selects an event still
// queued for it (a tool taken out of its toolNameMatch, say) sends that event no more; those it
// still selects go on.
func TestQueuedDeliveryOfANarrowedHook(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		h := newHarness(t, db, Settings{Retry: RetryPolicy{Fast: []time.Duration{time.Hour}, Ladder: []time.Duration{time.Hour}}})
		rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 503, "" })
		hk := h.add(Hook{HookName: "audit", HookType: PostToolUse, ToolNameMatch: "queryOrder|exportCustomers",
			DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		queued := map[string]string{}
		for _, tool := range []string{"queryOrder", "exportCustomers"} {
			id := h.observeOne(Event{HookType: PostToolUse, Context: &PostToolUseContext{ToolName: tool, Arguments: "{}", Succeeded: true}})
			h.waitDelivery(id, 10*time.Second, "tried once", func(d storage.Delivery) bool {
				return d.Status == storage.StatusPending && d.Attempts == 1
			})
			queued[tool] = id
		}
		hk.ToolNameMatch = "queryOrder"  // exportCustomers' output must not reach this receiver any more
		time.Sleep(2 * time.Millisecond) // the change is after the rows, to the millisecond
		if _, err := h.reg.Replace(ctx, hk.ID, hk); err != nil {
			t.Fatal(err)
		}
		before := rec.count()
		dropped := h.delivery(queued["exportCustomers"])
		// Its next attempt, as a worker makes it: none, and the row ends.
		if out := h.d.attempt(ctx, dropped); out.Status != storage.StatusDead || !strings.Contains(out.Error, "no longer selects") || rec.count() != before {
			t.Fatalf("the dropped tool's next attempt: %+v, %d requests (%d before)", out, rec.count(), before)
		}
		// A redelivery is refused, the record left as it is.
		var refused *RedeliverError
		if _, err := h.d.Redeliver(ctx, dropped.ID); !errors.As(err, &refused) || !strings.Contains(err.Error(), "no longer selects") {
			t.Fatalf("redelivery of the dropped tool's delivery: %v", err)
		}
		if now := h.delivery(queued["exportCustomers"]); now.Status != dropped.Status || now.Attempts != 1 || rec.count() != before {
			t.Fatalf("after the refused redelivery: %+v, %d requests", now, rec.count())
		}
		out, err := h.d.Redeliver(ctx, h.delivery(queued["queryOrder"]).ID)
		if err != nil || out.Attempts != 2 || rec.count() != before+1 {
			t.Fatalf("the kept tool's delivery: %+v %v, %d requests (%d before)", out, err, rec.count(), before)
		}
	})
}
