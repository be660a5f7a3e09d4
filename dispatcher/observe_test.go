package dispatcher

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// countDeliveries pages through every delivery with the given status ("" = all).
func countDeliveries(t *testing.T, db *storage.DB, status string) int {
	t.Helper()
	n := 0
	var before int64
	for {
		ds, err := db.ListDeliveries(context.Background(), storage.DeliveryFilter{Status: status, BeforeID: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n += len(ds)
		if len(ds) < 1000 {
			return n
		}
		before = ds[len(ds)-1].ID
	}
}

// TestObserveConcurrent: many goroutines observing at once share group commits; every returned
// id is unique, committed, and delivered exactly to its event.
func TestObserveConcurrent(t *testing.T) {
	const goroutines, perGoroutine = 200, 20
	const total = goroutines * perGoroutine
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		var mu sync.Mutex
		received := map[string]int{}
		rec := newRecorder(t, func(_ int, _ *http.Request, body []byte) (int, string) {
			var env Envelope
			if err := json.Unmarshal(body, &env); err == nil {
				mu.Lock()
				received[env.EventID]++
				mu.Unlock()
			}
			return 200, ""
		})
		h.add(Hook{HookName: "llm metrics", HookType: PostLLMCall, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})

		ids := make([][]string, goroutines)
		errs := make(chan error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perGoroutine {
					got, err := h.d.Observe(context.Background(), Event{HookType: PostLLMCall,
						Context: &PostLLMCallContext{Model: "m", Step: i}})
					if err != nil || len(got) != 1 {
						errs <- err
						return
					}
					ids[g] = append(ids[g], got[0])
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("observe: %v", err)
		}
		unique := map[string]bool{}
		for _, gs := range ids {
			for _, id := range gs {
				if unique[id] {
					t.Fatalf("eventId %s returned twice", id)
				}
				unique[id] = true
			}
		}
		if len(unique) != total {
			t.Fatalf("%d ids, want %d", len(unique), total)
		}
		// Observe returned, so every row is committed, whatever the workers have done since.
		if n := countDeliveries(t, db, ""); n != total {
			t.Fatalf("%d deliveries committed, want %d", n, total)
		}
		waitFor(t, 120*time.Second, "every delivery to be delivered", func() bool {
			return countDeliveries(t, db, storage.StatusDelivered) == total
		})
		mu.Lock()
		defer mu.Unlock()
		for id := range unique {
			if received[id] != 1 {
				t.Errorf("event %s received %d times", id, received[id])
			}
		}
		if len(received) != total {
			t.Errorf("receiver saw %d events, want %d", len(received), total)
		}
	})
}
