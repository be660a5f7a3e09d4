package dispatcher

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/breaker"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// blackhole accepts connections and never answers: every request to it times out.
type blackhole struct {
	l        net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
}

func newBlackhole(t *testing.T) *blackhole {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	})
	return b
}

func (b *blackhole) url() string { return "http://" + b.l.Addr().String() }

func breakerOf(d *Dispatcher, url string) (breaker.Status, bool) {
	for _, s := range d.Breakers() {
		if s.URL == url {
			return s, true
		}
	}
	return breaker.Status{}, false
}

// TestBreaker: consecutive timeouts open a URL's breaker; while open, interceptive calls resolve
// by failureMode without waiting and observational deliveries wait without spending an attempt.
// HTTP answers, even 500s, prove the receiver alive and never open it.
func TestBreaker(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{Breaker: breaker.Settings{ConsecutiveFailures: 3, OpenFor: 10 * time.Second}})
		ctx := context.Background()

		t.Run("timeouts open it", func(t *testing.T) {
			bh := newBlackhole(t)
			agent := int64(1)
			hk := h.add(Hook{HookName: "silent", HookType: PreToolUse, AgentID: &agent,
				DispatchConfig: DispatchConfig{URL: bh.url(), TimeoutMs: 200, FailureMode: FailClosed}})
			obs := h.add(Hook{HookName: "silent audit", HookType: PostToolUse, AgentID: &agent,
				DispatchConfig: DispatchConfig{URL: bh.url(), TimeoutMs: 200}})
			ev := Event{HookType: PreToolUse, AgentID: &agent, Context: &PreToolUseContext{ToolName: "t", Arguments: "{}"}}
			for i := range 3 {
				start := time.Now()
				dec, err := h.d.Intercept(ctx, ev)
				if err != nil || dec.Decision != Deny {
					t.Fatalf("call %d: %+v %v", i+1, dec, err)
				}
				if el := time.Since(start); el < 200*time.Millisecond {
					t.Fatalf("call %d returned after %s, before its timeout: the breaker opened too early", i+1, el)
				}
				log := h.decisions(dec.DecisionID, 1)[0]
				if !log.FromFailureMode || !strings.Contains(log.Error, "timeout") {
					t.Errorf("call %d logged %+v", i+1, log)
				}
			}
			st, ok := breakerOf(h.d, bh.url())
			if !ok || st.State != breaker.StateOpen || st.ConsecutiveFailures != 3 || st.OpenedAt == nil {
				t.Fatalf("breaker after 3 timeouts: %+v (known %v), want open", st, ok)
			}
			connsBefore := bh.accepted.Load()
			for i := range 5 {
				start := time.Now()
				dec, err := h.d.Intercept(ctx, ev)
				el := time.Since(start)
				if err != nil || dec.Decision != Deny {
					t.Fatalf("short-circuited call %d: %+v %v", i+1, dec, err)
				}
				if el > 100*time.Millisecond {
					t.Errorf("short-circuited call %d took %s; an open breaker must not wait for the 200 ms timeout", i+1, el)
				}
				log := h.decisions(dec.DecisionID, 1)[0]
				if !log.FromFailureMode || log.Outcome != Deny || log.HookID != hk.ID || !strings.Contains(log.Error, "open") {
					t.Errorf("short-circuited call %d logged %+v", i+1, log)
				}
			}
			if n := bh.accepted.Load(); n != connsBefore {
				t.Errorf("%d new connections to an open breaker's URL", n-connsBefore)
			}

			// An observational delivery to the open URL waits for the breaker, keeping its attempts.
			id := h.observeOne(Event{HookType: PostToolUse, AgentID: &agent, Context: &PostToolUseContext{ToolName: "t"}})
			d := h.waitDelivery(id, 10*time.Second, "to meet the open breaker", func(d storage.Delivery) bool {
				return d.LastError == "breaker open"
			})
			if d.Status != storage.StatusPending || d.Attempts != 0 || d.HookID != obs.ID {
				t.Fatalf("delivery at an open breaker: %s after %d attempts, want pending after 0", d.Status, d.Attempts)
			}
			if as := h.attempts(d.ID); len(as) != 0 {
				t.Errorf("attempts recorded at an open breaker: %+v", as)
			}
			if open := st.OpenedAt.Add(10 * time.Second); d.NextAttemptAt.Before(open.Add(-time.Millisecond)) {
				t.Errorf("next attempt at %s, before the breaker lets a probe through at %s", d.NextAttemptAt, open)
			}
			if n := bh.accepted.Load(); n != connsBefore {
				t.Errorf("the delivery connected to an open breaker's URL")
			}
			// A redelivery asked now sends nothing either, and says so instead of a success.
			var refused *RedeliverError
			if _, err := h.d.Redeliver(ctx, d.ID); !errors.As(err, &refused) || !strings.Contains(err.Error(), "breaker") ||
				!strings.Contains(err.Error(), "no attempt was made") {
				t.Fatalf("redeliver at an open breaker: %v", err)
			}
			if after := h.delivery(id); after.Attempts != 0 || after.Status != storage.StatusPending || bh.accepted.Load() != connsBefore {
				t.Fatalf("the refused redelivery touched the delivery: %+v", after)
			}
		})

		t.Run("a caller's cancellation neither counts nor resets", func(t *testing.T) {
			bh := newBlackhole(t)
			agent := int64(3)
			h.add(Hook{HookName: "silent 2", HookType: PreToolUse, AgentID: &agent,
				DispatchConfig: DispatchConfig{URL: bh.url(), TimeoutMs: 200}})
			ev := Event{HookType: PreToolUse, AgentID: &agent, Context: &PreToolUseContext{ToolName: "t"}}
			failures := func() uint32 { st, _ := breakerOf(h.d, bh.url()); return st.ConsecutiveFailures }
			for range 2 {
				h.d.Intercept(ctx, ev)
			}
			if n := failures(); n != 2 {
				t.Fatalf("%d consecutive failures after 2 timeouts", n)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel() // the caller is gone before the request is out: no timing to race with
			// Not the hook failing, so not its failureMode: the record says the caller went away.
			dec, err := h.d.Intercept(cctx, ev)
			var gone *CallerGoneError
			if !errors.As(err, &gone) || gone.HookName != "silent 2" || dec.DecisionID == "" {
				t.Fatalf("cancelled call: %+v %v", dec, err)
			}
			if row := h.decisions(dec.DecisionID, 1)[0]; row.Outcome != storage.OutcomeError || row.FromFailureMode ||
				!strings.Contains(row.Error, "the caller went away") {
				t.Fatalf("the cancelled call's row: %+v", row)
			}
			if n := failures(); n != 2 {
				t.Fatalf("%d consecutive failures after a cancelled call; want still 2: our giving up says nothing about the receiver", n)
			}
			// Ended by hookd's own shutdown (serve's cause), the caller is still there: the chain
			// ends in a StoppedError, which its API answers (a block at the coding agents' adapters).
			sctx, stop := context.WithCancelCause(ctx)
			stop(ErrShutdown)
			dec, err = h.d.Intercept(sctx, ev)
			var stopped *StoppedError
			if !errors.As(err, &stopped) || errors.As(err, &gone) || !errors.Is(err, ErrStopped) || stopped.HookName != "silent 2" {
				t.Fatalf("call cut short by the shutdown: %+v %v", dec, err)
			}
			if row := h.decisions(dec.DecisionID, 1)[0]; row.Outcome != storage.OutcomeError || row.FromFailureMode ||
				!strings.Contains(row.Error, "hookd stopped while hook") {
				t.Fatalf("the row of the call cut short: %+v", row)
			}
			if n := failures(); n != 2 {
				t.Fatalf("%d consecutive failures after a call cut short by the shutdown; want still 2", n)
			}
			h.d.Intercept(ctx, ev)
			if st, _ := breakerOf(h.d, bh.url()); st.State != breaker.StateOpen {
				t.Fatalf("breaker %+v after 3 timeouts around a cancellation, want open", st)
			}
		})

		t.Run("500s never open it", func(t *testing.T) {
			rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 500, "boom" })
			agent := int64(2)
			// A path of its own: the receiver may get the port of a blackhole closed above, whose
			// URL's breaker is open, and breakers are per URL.
			url := rec.srv.URL + "/erroring"
			h.add(Hook{HookName: "erroring", HookType: PreToolUse, AgentID: &agent,
				DispatchConfig: DispatchConfig{URL: url, TimeoutMs: 200}})
			for i := range 20 {
				dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, AgentID: &agent, Context: &PreToolUseContext{ToolName: "t"}})
				if err != nil || dec.Decision != Allow {
					t.Fatalf("call %d: %+v %v", i+1, dec, err)
				}
			}
			if rec.count() != 20 {
				t.Fatalf("receiver got %d of 20 calls", rec.count())
			}
			st, _ := breakerOf(h.d, url)
			if st.State != breaker.StateClosed || st.ConsecutiveFailures != 0 {
				t.Fatalf("breaker after 20 HTTP 500s: %+v, want closed", st)
			}
		})
	})
}

// TestBreakerRecovery: once OpenFor has passed a probe goes through, an answer closes the
// breaker, and a delivery that waited for it is delivered on its first attempt.
func TestBreakerRecovery(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		ctx := context.Background()
		h := newHarness(t, db, Settings{Breaker: breaker.Settings{ConsecutiveFailures: 3, OpenFor: time.Second}})
		var rec *recorder
		rec = newRawRecorder(t, func(n int, w http.ResponseWriter, r *http.Request, _ []byte) {
			if n <= 3 {
				rec.block(r, 10*time.Second) // silent until the breaker is open
				return
			}
			w.Write([]byte(`{"decision":"deny","reason":"back"}`))
		})
		agent := int64(4)
		h.add(Hook{HookName: "flaky", HookType: PreToolUse, AgentID: &agent,
			DispatchConfig: DispatchConfig{URL: rec.srv.URL, TimeoutMs: 200}})
		h.add(Hook{HookName: "flaky audit", HookType: PostToolUse, AgentID: &agent,
			DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		ev := Event{HookType: PreToolUse, AgentID: &agent, Context: &PreToolUseContext{ToolName: "t"}}
		for range 3 {
			h.d.Intercept(ctx, ev)
		}
		if st, _ := breakerOf(h.d, rec.srv.URL); st.State != breaker.StateOpen {
			t.Fatalf("breaker %+v, want open", st)
		}
		id := h.observeOne(Event{HookType: PostToolUse, AgentID: &agent, Context: &PostToolUseContext{ToolName: "t"}})
		// The delivery waits out the breaker without spending an attempt, then goes through
		// (as the probe, or right after it) on its first attempt.
		d := h.waitDelivery(id, 10*time.Second, "delivered after the breaker", func(d storage.Delivery) bool {
			return d.Status == storage.StatusDelivered
		})
		if d.Attempts != 1 {
			t.Errorf("delivered after %d attempts, want 1: waiting for a breaker spends none", d.Attempts)
		}
		dec, err := h.d.Intercept(ctx, ev)
		if err != nil || dec.Decision != Deny || dec.Reason != "back" {
			t.Fatalf("after recovery: %+v %v, want the receiver's own answer", dec, err)
		}
		if st, _ := breakerOf(h.d, rec.srv.URL); st.State != breaker.StateClosed {
			t.Fatalf("breaker %+v after a successful probe, want closed", st)
		}
	})
}

// TestInterceptiveBulkhead: over the interceptive concurrency limit, calls resolve by failureMode
// at once instead of queueing behind slow receivers.
func TestInterceptiveBulkhead(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{InterceptiveConcurrency: 2})
		release := make(chan struct{})
		var releaseOnce sync.Once
		defer releaseOnce.Do(func() { close(release) })
		var rec *recorder
		rec = newRawRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request, _ []byte) {
			select {
			case <-release:
			case <-rec.done:
			}
			w.Write([]byte(`{"decision":"allow"}`))
		})
		h.add(Hook{HookName: "slow", HookType: UserMessage,
			DispatchConfig: DispatchConfig{URL: rec.srv.URL, TimeoutMs: 30000, FailureMode: FailClosed}})
		type result struct {
			dec Decision
			err error
		}
		results := make(chan result, 5)
		for range 5 {
			go func() {
				dec, err := h.d.Intercept(context.Background(), Event{HookType: UserMessage,
					Context: &UserMessageContext{UserInput: "hi"}})
				results <- result{dec, err}
			}()
		}
		// The receiver holds the two admitted calls until released, so the three resolved here
		// cannot have waited for it.
		for i := range 3 {
			select {
			case r := <-results:
				if r.err != nil || r.dec.Decision != Deny {
					t.Fatalf("rejected call %d: %+v %v", i+1, r.dec, r.err)
				}
				log := h.decisions(r.dec.DecisionID, 1)[0]
				if !log.FromFailureMode || !strings.Contains(log.Error, "bulkhead") {
					t.Errorf("rejected call %d logged %+v", i+1, log)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d calls resolved while two held the bulkhead", i)
			}
		}
		if n := h.d.BulkheadRejected(); n != 3 {
			t.Fatalf("BulkheadRejected() = %d, want 3", n)
		}
		waitFor(t, 10*time.Second, "the two admitted calls to reach the receiver", func() bool { return rec.count() == 2 })
		releaseOnce.Do(func() { close(release) })
		for i := range 2 {
			r := <-results
			if r.err != nil || r.dec.Decision != Allow {
				t.Fatalf("admitted call %d: %+v %v", i+1, r.dec, r.err)
			}
		}
		if rec.count() != 2 || h.d.BulkheadRejected() != 3 {
			t.Fatalf("receiver got %d calls, %d rejected", rec.count(), h.d.BulkheadRejected())
		}
	})
}

// TestObservationalBulkhead: no more deliveries in flight than ObservationalInFlight, and the
// backlog waits in the outbox until it is all delivered.
func TestObservationalBulkhead(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{ObservationalInFlight: 4})
		rec := newRawRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) {
			time.Sleep(30 * time.Millisecond)
			w.WriteHeader(204)
		})
		h.add(Hook{HookName: "slow audit", HookType: SessionStart, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		var ids []string
		for i := range 50 {
			ids = append(ids, h.observeOne(Event{HookType: SessionStart, SessionID: ptr(int64(i)), Context: &SessionStartContext{NewSession: true}}))
		}
		waitFor(t, 30*time.Second, "50 deliveries", func() bool {
			ds, err := db.ListDeliveries(context.Background(), storage.DeliveryFilter{Status: storage.StatusDelivered, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(ds) == 50
		})
		if m := rec.maxInflight.Load(); m > 4 || m < 1 {
			t.Fatalf("%d requests in flight at once, limit 4", m)
		}
		seen := map[string]bool{}
		for _, env := range rec.envelopes(t) {
			seen[env.EventID] = true
		}
		for _, id := range ids {
			if !seen[id] {
				t.Errorf("event %s never reached the receiver", id)
			}
		}
		if len(rec.requests()) != 50 {
			t.Errorf("receiver got %d requests for 50 events", len(rec.requests()))
		}
		t.Logf("peak concurrency at the receiver: %d", rec.maxInflight.Load())
	})
}
