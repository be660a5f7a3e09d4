package storage_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// A redelivery by hand does not claim a delivery whose hook is disabled, pending (paused) or
// final: it is a *HookDisabledError naming the hook, and the row is left exactly as it was. Once
// the hook is enabled it claims as before; a row in flight is still ErrBusy.
func TestClaimDeliveryOfADisabledHook(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		h := storage.Hook{HookType: "post_tool_use", Enabled: true, Doc: []byte(`{"hookName":"audit"}`)}
		if err := db.CreateHook(ctx, &h); err != nil {
			t.Fatal(err)
		}
		ds := []storage.Delivery{
			{EventID: storage.NewTSIDString(), HookID: h.ID, HookType: "post_tool_use", HookName: "audit", OccurredAt: time.Now(), Context: []byte(`{}`)},
			{EventID: storage.NewTSIDString(), HookID: h.ID, HookType: "post_tool_use", HookName: "audit", OccurredAt: time.Now(), Context: []byte(`{}`)},
		}
		if err := db.EnqueueDeliveries(ctx, ds); err != nil {
			t.Fatal(err)
		}
		queued, final := ds[0].ID, ds[1].ID
		now := time.Now()
		claimed, err := db.ClaimDelivery(ctx, final, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CompleteDeliveries(ctx, []storage.Outcome{{Delivery: claimed, Status: storage.StatusDead, Attempts: 9}}); err != nil {
			t.Fatal(err)
		}
		setEnabled := func(on bool) {
			t.Helper()
			h.Enabled = on
			if err := db.UpdateHook(ctx, &h); err != nil {
				t.Fatal(err)
			}
		}
		setEnabled(false)
		for _, id := range []int64{queued, final} {
			before, err := db.GetDelivery(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.ClaimDelivery(ctx, id, now.Add(time.Second), time.Minute)
			var off *storage.HookDisabledError
			if !errors.As(err, &off) || off.DeliveryID != id || off.HookID != h.ID {
				t.Fatalf("claim of delivery %d of a disabled hook: %v, want a *HookDisabledError naming hook %d", id, err, h.ID)
			}
			after, err := db.GetDelivery(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if after.Status != before.Status || after.Paused != before.Paused || !after.UpdatedAt.Equal(before.UpdatedAt) ||
				!after.NextAttemptAt.Equal(before.NextAttemptAt) {
				t.Fatalf("delivery %d changed by a refused claim: %+v, was %+v", id, after, before)
			}
		}
		if d, _ := db.GetDelivery(ctx, queued); d.Status != storage.StatusPending || !d.Paused {
			t.Fatalf("queued delivery: %s paused=%v, want pending and paused", d.Status, d.Paused)
		}

		setEnabled(true)
		if _, err := db.ClaimDelivery(ctx, queued, now, time.Minute); err != nil {
			t.Fatalf("claim once enabled: %v", err)
		}
		if _, err := db.ClaimDelivery(ctx, queued, now, time.Minute); err != storage.ErrBusy {
			t.Fatalf("claim of a row in flight: %v, want ErrBusy", err)
		}
	})
}
