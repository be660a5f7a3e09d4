package dispatcher

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestDisabledHookPausesItsDeliveries: the queued deliveries of a disabled hook stay pending and
// paused, no attempt reaches its receiver while another hook's deliveries go out, and they all
// arrive once it is enabled again. Deleting a hook ends its queued deliveries as dead.
func TestDisabledHookPausesItsDeliveries(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		reg, err := NewRegistry(ctx, db, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		d := New(db, reg, slog.New(&logCapture{}), Settings{Version: "test"})
		h := &harness{t: t, db: db, reg: reg, d: d}
		paused, other := newRecorder(t, nil), newRecorder(t, nil)
		a := h.add(Hook{HookName: "paused", HookType: PostToolUse, DispatchConfig: DispatchConfig{URL: paused.srv.URL}})
		h.add(Hook{HookName: "other", HookType: SessionStart, DispatchConfig: DispatchConfig{URL: other.srv.URL}})
		gone := h.add(Hook{HookName: "gone", HookType: PostLLMCall,
			DispatchConfig: DispatchConfig{URL: paused.srv.URL}})

		// Queued before the dispatcher delivers anything: due now, waiting for a claim.
		var queued []string
		for range 5 {
			queued = append(queued, h.observeOne(Event{HookType: PostToolUse, Context: &PostToolUseContext{ToolName: "t"}}))
		}
		a.Enabled = ptr(false)
		if _, err := reg.Replace(ctx, a.ID, a); err != nil {
			t.Fatal(err)
		}
		for _, id := range queued {
			if d := h.delivery(id); d.Status != storage.StatusPending || !d.Paused {
				t.Fatalf("delivery of a disabled hook: %s paused=%v, want pending and paused", d.Status, d.Paused)
			}
		}
		// Deleting a hook ends what it had queued, paused or not.
		ended := h.observeOne(Event{HookType: PostLLMCall, Context: &PostLLMCallContext{Model: "m"}})
		gone.Enabled = ptr(false)
		if _, err := reg.Replace(ctx, gone.ID, gone); err != nil {
			t.Fatal(err)
		}
		if err := reg.Delete(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		if d := h.delivery(ended); d.Status != storage.StatusDead || d.LastError != "hook deleted" || d.Paused {
			t.Fatalf("after delete: %s %q paused=%v, want dead (hook deleted)", d.Status, d.LastError, d.Paused)
		}

		if err := d.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Stop(context.Background()) })

		// Another hook's event, queued after them, is delivered: the claimer has passed the
		// paused rows (due earlier) by then.
		id := h.observeOne(Event{HookType: SessionStart, Context: &SessionStartContext{NewSession: true}})
		h.waitDelivery(id, 10*time.Second, "the other hook's delivery", func(d storage.Delivery) bool {
			return d.Status == storage.StatusDelivered
		})
		if n := paused.count(); n != 0 {
			t.Fatalf("%d attempts reached the disabled hook's receiver", n)
		}

		a.Enabled = ptr(true)
		if _, err := reg.Replace(ctx, a.ID, a); err != nil {
			t.Fatal(err)
		}
		for _, id := range queued {
			h.waitDelivery(id, 10*time.Second, "a resumed delivery", func(d storage.Delivery) bool {
				return d.Status == storage.StatusDelivered && !d.Paused
			})
		}
		if n := paused.count(); n != len(queued) {
			t.Fatalf("%d requests after enabling, want %d", n, len(queued))
		}

	})
}

// TestStopWaitsForTheLastCycleDeliveries: Stop's barrier can be committed in the same cycle as
// rows that cycle hands to workers, and is answered before those deliveries start; the wait for
// the deliveries in flight that follows it still covers them (commitCycle counts them before it
// answers anyone).
func TestStopWaitsForTheLastCycleDeliveries(t *testing.T) {
	h := newHarness(t, storagetest.SQLite(t), Settings{})
	rec := newRecorder(t, nil)
	hk := h.add(Hook{HookName: "observer", HookType: PostToolUse, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
	ctx := context.Background()
	c := h.d.route[writeOutbox]
	row := storage.Delivery{EventID: storage.NewTSIDString(), HookID: hk.ID, HookType: string(PostToolUse),
		HookName: hk.HookName, OccurredAt: time.Now(), Context: []byte(`{"toolName":"t","succeeded":true}`)}
	observed := &writeReq{kind: writeOutbox, deliveries: []storage.Delivery{row}, done: make(chan error, 1)}
	barrier := &writeReq{kind: writeOutbox, done: make(chan error, 1)} // what Stop's closeKind queues
	// The writer takes nothing until both are queued: one cycle takes both.
	c.cycle.Lock()
	for _, r := range []*writeReq{observed, barrier} {
		if err := c.enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	c.cycle.Unlock()
	if err := <-barrier.done; err != nil {
		t.Fatal(err)
	}
	if err := <-observed.done; err != nil {
		t.Fatal(err)
	}
	h.d.inflight.Wait() // what Stop does next
	if got := rec.count(); got != 1 {
		t.Fatalf("the receiver had %d requests once the deliveries in flight were waited for, want 1", got)
	}
}
