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

// TestDeliveryOfAHookNotYetLoaded: a due delivery of a hook this process has not loaded yet (made
// by another replica, whose change reaches this one within its refresh) waits for it, its
// attempts unspent, and goes out once the hook is loaded; only a hook the database no longer has
// ends its deliveries as dead.
func TestDeliveryOfAHookNotYetLoaded(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		h := newHarness(t, db, Settings{})
		rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 204, "" })
		// Written to the database as another replica writes it, not through this registry.
		hk := Hook{HookName: "fresh", HookType: PostLLMCall, DispatchConfig: DispatchConfig{URL: rec.srv.URL}}
		if err := hk.Normalize(); err != nil {
			t.Fatal(err)
		}
		row, err := toRow(&hk)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CreateHook(ctx, &row); err != nil {
			t.Fatal(err)
		}
		eventID := storage.NewTSIDString()
		if err := db.EnqueueDeliveries(ctx, []storage.Delivery{{EventID: eventID, HookID: row.ID, HookType: string(PostLLMCall),
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
