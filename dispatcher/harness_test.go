package dispatcher

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// harness is a dispatcher over a real database with real receivers.
type harness struct {
	t    *testing.T
	db   *storage.DB
	reg  *Registry
	d    *Dispatcher
	logs *logCapture
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t *testing.T, db *storage.DB, s Settings) *harness {
	t.Helper()
	ctx := context.Background()
	logs := &logCapture{}
	reg, err := NewRegistry(ctx, db, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	if s.Version == "" {
		s.Version = "test"
	}
	d := New(db, reg, slog.New(logs), s)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	return &harness{t: t, db: db, reg: reg, d: d, logs: logs}
}

func (h *harness) addHook(spec string) Hook {
	h.t.Helper()
	var hk Hook
	if err := json.Unmarshal([]byte(spec), &hk); err != nil {
		h.t.Fatal(err)
	}
	return h.add(hk)
}

// add registers hk through the registry, as the admin API does.
func (h *harness) add(hk Hook) Hook {
	h.t.Helper()
	out, err := h.reg.Create(context.Background(), hk)
	if err != nil {
		h.t.Fatalf("create hook: %v", err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond until it holds or the deadline passes; it never depends on how fast the
// machine is, only on the condition becoming true within a generous bound.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// decisions returns the decision log entries of decisionID oldest first, checking there are n.
// It reads once, without waiting: with the default durability (sync) the rows are committed
// before the decision is returned.
func (h *harness) decisions(decisionID string, n int) []storage.Decision {
	h.t.Helper()
	got, err := h.db.ListDecisions(context.Background(), storage.DecisionFilter{DecisionID: decisionID})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(got) != n {
		h.t.Fatalf("decision log of %s: %d entries, want %d: %+v", decisionID, len(got), n, got)
	}
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	return got
}

// delivery reads the one delivery of eventID.
func (h *harness) delivery(eventID string) storage.Delivery {
	h.t.Helper()
	ds, err := h.db.ListDeliveries(context.Background(), storage.DeliveryFilter{EventID: eventID})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(ds) != 1 {
		h.t.Fatalf("deliveries of %s: %d", eventID, len(ds))
	}
	return ds[0]
}

// waitDelivery polls the delivery of eventID until cond holds.
func (h *harness) waitDelivery(eventID string, within time.Duration, what string, cond func(storage.Delivery) bool) storage.Delivery {
	h.t.Helper()
	var d storage.Delivery
	waitFor(h.t, within, "delivery "+eventID+" "+what, func() bool {
		d = h.delivery(eventID)
		return cond(d)
	})
	return d
}

// attempts returns the recorded attempts of a delivery.
func (h *harness) attempts(id int64) []storage.Attempt {
	h.t.Helper()
	m, err := h.db.Attempts(context.Background(), []int64{id})
	if err != nil {
		h.t.Fatal(err)
	}
	return m[id]
}

// observeOne queues ev and returns its single eventId.
func (h *harness) observeOne(ev Event) string {
	h.t.Helper()
	ids, err := h.d.Observe(context.Background(), ev)
	if err != nil || len(ids) != 1 {
		h.t.Fatalf("observe: %v %v", ids, err)
	}
	return ids[0]
}

// recorder is a receiver that keeps every request and answers with a programmable handler.
type recorder struct {
	mu     sync.Mutex
	reqs   []recorded
	handle func(n int, w http.ResponseWriter, r *http.Request, body []byte)
	srv    *httptest.Server
	// done closes when the test ends, before the server closes, so that handlers that block
	// (slow or silent receivers) return.
	done chan struct{}

	inflight, maxInflight atomic.Int64
}

type recorded struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newRecorder(t *testing.T, answer func(n int, r *http.Request, body []byte) (int, string)) *recorder {
	return newRawRecorder(t, func(n int, w http.ResponseWriter, r *http.Request, body []byte) {
		status, out := 200, ""
		if answer != nil {
			status, out = answer(n, r, body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, out)
	})
}

// newRawRecorder records each request and leaves the answer entirely to handle.
func newRawRecorder(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request, body []byte)) *recorder {
	rec := &recorder{handle: handle, done: make(chan struct{})}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := rec.inflight.Add(1)
		defer rec.inflight.Add(-1)
		for {
			m := rec.maxInflight.Load()
			if cur <= m || rec.maxInflight.CompareAndSwap(m, cur) {
				break
			}
		}
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(rec.reqs)
		rec.mu.Unlock()
		rec.handle(n, w, r, body)
	}))
	t.Cleanup(rec.srv.Close)
	t.Cleanup(func() { close(rec.done) }) // runs first
	return rec
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// block holds a handler until the client gives up, the test ends, or max passes.
func (r *recorder) block(req *http.Request, max time.Duration) {
	select {
	case <-req.Context().Done():
	case <-r.done:
	case <-time.After(max):
	}
}

// envelopes decodes every recorded request body.
func (r *recorder) envelopes(t testing.TB) []Envelope {
	t.Helper()
	var out []Envelope
	for _, q := range r.requests() {
		var env Envelope
		if err := json.Unmarshal(q.body, &env); err != nil {
			t.Fatalf("request body is not an envelope: %v: %s", err, q.body)
		}
		out = append(out, env)
	}
	return out
}

// logCapture is a slog handler that keeps records, so tests can see the warnings the
// dispatcher promises.
type logCapture struct {
	mu      sync.Mutex
	recs    []capturedLog
	changed chan struct{} // closed at the next record (await)
}

type capturedLog struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	l := capturedLog{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.Any()
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, l)
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
	c.mu.Unlock()
	return nil
}

// await returns once a record with message msg has been logged, and fails the test when none
// has been after 10 s.
func (c *logCapture) await(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for _, l := range c.recs {
			if l.msg == msg {
				c.mu.Unlock()
				return
			}
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no %q logged", msg)
		}
	}
}

// find returns the records at level whose attribute key equals value.
func (c *logCapture) find(level slog.Level, key string, value any) []capturedLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capturedLog
	for _, l := range c.recs {
		if l.level == level && l.attrs[key] == value {
			out = append(out, l)
		}
	}
	return out
}

func TestSmokeInterceptAndObserve(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		deny := newRecorder(t, func(int, *http.Request, []byte) (int, string) {
			return 200, `{"decision":"DENY","reason":"too much"}`
		})
		obs := newRecorder(t, nil)
		h.addHook(`{"hookName":"deny","hookType":"pre_tool_use","toolNameMatch":"transferFunds","dispatchConfig":{"url":"` + deny.srv.URL + `","signingSecret":"s"}}`)
		h.addHook(`{"hookName":"audit","hookType":"post_tool_use","dispatchConfig":{"url":"` + obs.srv.URL + `"}}`)
		dec, err := h.d.Intercept(context.Background(), Event{HookType: PreToolUse, TraceID: "tr-1",
			Context: &PreToolUseContext{ToolName: "transferFunds", ToolCallID: "c1", Arguments: `{"amount":5}`}})
		if err != nil || dec.Decision != Deny || dec.Reason != "too much" {
			t.Fatalf("intercept: %+v %v", dec, err)
		}
		dec, _ = h.d.Intercept(context.Background(), Event{HookType: PreToolUse,
			Context: &PreToolUseContext{ToolName: "other", Arguments: `{}`}})
		if dec.Decision != Allow {
			t.Fatalf("unmatched tool: %+v", dec)
		}
		ids, err := h.d.Observe(context.Background(), Event{HookType: PostToolUse,
			Context: &PostToolUseContext{ToolName: "x", Output: "plain text", Succeeded: true}})
		if err != nil || len(ids) != 1 {
			t.Fatalf("observe: %v %v", ids, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(obs.requests()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		got := obs.requests()
		if len(got) != 1 {
			t.Fatalf("observational deliveries: %d", len(got))
		}
		var env Envelope
		json.Unmarshal(got[0].body, &env)
		if env.EventID != ids[0] || env.DeliveryAttempt != 1 || string(env.Context) != `{"toolName":"x","toolCallId":"","arguments":"","output":"plain text","succeeded":true,"errorMessage":null,"durationMs":0}` {
			t.Fatalf("envelope: %s", got[0].body)
		}
		r := deny.requests()[0]
		if r.header.Get("X-Webhook-Signature") == "" || r.header.Get("X-Request-Id") != "tr-1" || r.header.Get("User-Agent") != "hookd/test" {
			t.Fatalf("headers: %v", r.header)
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			ds, _ := db.ListDeliveries(context.Background(), storage.DeliveryFilter{EventID: ids[0]})
			if len(ds) == 1 && ds[0].Status == storage.StatusDelivered {
				return
			}
		}
		t.Fatal("delivery not recorded as delivered")
	})
}
