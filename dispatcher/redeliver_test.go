package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

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
