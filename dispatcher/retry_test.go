package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// closedPortURL is a loopback URL nobody listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// resetConn answers a request by resetting the connection: no HTTP response at all.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // close with RST rather than FIN
	}
	conn.Close()
}

// TestRetryClassification: for observational delivery 2xx is delivered; 429, 5xx and every
// no-response failure are retried; any other status is the receiver's final word after exactly
// one attempt. Retry-After on 429 / 503 pushes the next attempt out, capped at 30 minutes.
func TestRetryClassification(t *testing.T) {
	const fast = 10 * time.Second
	type row struct {
		name   string
		status int    // the receiver's answer; 0 for the special receivers below
		header string // Retry-After
		url    func(t *testing.T, target *recorder) string
		want   string // final delivery status after the first attempt
		class  string
		// minWait and maxWait bound next_attempt_at - dispatchedAt for retried rows.
		minWait, maxWait time.Duration
	}
	retried := func(name string, status int, class string) row {
		return row{name: name, status: status, want: storage.StatusPending, class: class, minWait: fast, maxWait: fast + 5*time.Second}
	}
	final := func(name string, status int, class string) row {
		return row{name: name, status: status, want: storage.StatusFailed, class: class}
	}
	delivered := func(name string, status int) row {
		return row{name: name, status: status, want: storage.StatusDelivered}
	}
	rows := []row{
		delivered("200", 200), delivered("201", 201), delivered("204", 204),
		retried("429", 429, "http_429"), retried("500", 500, "http_5xx"), retried("502", 502, "http_5xx"),
		retried("503", 503, "http_5xx"), retried("504", 504, "http_5xx"),
		final("301", 301, "http_3xx"), final("302", 302, "http_3xx"), final("307", 307, "http_3xx"),
		final("400", 400, "http_4xx"), final("401", 401, "http_4xx"), final("403", 403, "http_4xx"),
		final("404", 404, "http_4xx"), final("410", 410, "http_4xx"), final("422", 422, "http_4xx"),
		{name: "connection refused", url: func(t *testing.T, _ *recorder) string { return closedPortURL(t) },
			want: storage.StatusPending, class: "connection_refused", minWait: fast, maxWait: fast + 5*time.Second},
		{name: "connection reset", url: func(t *testing.T, _ *recorder) string {
			return newRawRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request, _ []byte) { resetConn(w) }).srv.URL
		}, want: storage.StatusPending, class: "connection_reset", minWait: fast, maxWait: fast + 5*time.Second},
		{name: "timeout", url: func(t *testing.T, _ *recorder) string {
			var rec *recorder
			rec = newRawRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request, _ []byte) { rec.block(r, 10*time.Second) })
			return rec.srv.URL
		}, want: storage.StatusPending, class: "timeout", minWait: fast, maxWait: fast + 5*time.Second},
		{name: "429 Retry-After seconds", status: 429, header: "120", want: storage.StatusPending, class: "http_429",
			minWait: 120 * time.Second, maxWait: 125 * time.Second},
		{name: "503 Retry-After seconds", status: 503, header: "300", want: storage.StatusPending, class: "http_5xx",
			minWait: 300 * time.Second, maxWait: 305 * time.Second},
		{name: "429 Retry-After shorter than the ladder", status: 429, header: "1", want: storage.StatusPending, class: "http_429",
			minWait: fast, maxWait: fast + 5*time.Second},
		{name: "503 Retry-After capped", status: 503, header: "7200", want: storage.StatusPending, class: "http_5xx",
			minWait: 30 * time.Minute, maxWait: 30*time.Minute + 5*time.Second},
		{name: "429 Retry-After date capped", status: 429, header: "date+2h", want: storage.StatusPending, class: "http_429",
			minWait: 30 * time.Minute, maxWait: 30*time.Minute + 5*time.Second},
	}
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{Retry: RetryPolicy{Fast: []time.Duration{fast, fast, fast}, Ladder: []time.Duration{fast}}})
		for i, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				target := newRecorder(t, nil) // where 3xx point
				var rec *recorder
				url := ""
				if r.url != nil {
					url = r.url(t, target)
				} else {
					rec = newRawRecorder(t, func(_ int, w http.ResponseWriter, req *http.Request, _ []byte) {
						if r.status/100 == 3 {
							w.Header().Set("Location", target.srv.URL+"/moved")
						}
						switch {
						case r.header == "date+2h":
							w.Header().Set("Retry-After", time.Now().Add(2*time.Hour).UTC().Format(http.TimeFormat))
						case r.header != "":
							w.Header().Set("Retry-After", r.header)
						}
						w.WriteHeader(r.status)
						if r.status != 204 {
							fmt.Fprintf(w, `{"status":%d}`, r.status)
						}
					})
					url = rec.srv.URL
				}
				tool := fmt.Sprintf("tool_%d", i)
				h.add(Hook{HookName: "classify " + r.name, HookType: PostToolUse, ToolNameMatch: tool,
					DispatchConfig: DispatchConfig{URL: url, TimeoutMs: 200}})
				id := h.observeOne(Event{HookType: PostToolUse, Context: &PostToolUseContext{ToolName: tool}})
				d := h.waitDelivery(id, 10*time.Second, "after its first attempt", func(d storage.Delivery) bool { return d.Attempts >= 1 && d.Status != storage.StatusDelivering })
				if d.Status != r.want || d.Attempts != 1 {
					t.Fatalf("status %s after %d attempts (last %d %q), want %s after 1", d.Status, d.Attempts, d.LastStatusCode, d.LastError, r.want)
				}
				as := h.attempts(d.ID)
				if len(as) != 1 {
					t.Fatalf("%d attempts recorded", len(as))
				}
				a := as[0]
				if a.Attempt != 1 || a.StatusCode != r.status || a.ErrorClass != r.class || d.LastStatusCode != r.status {
					t.Errorf("attempt %+v (delivery code %d), want status %d class %q", a, d.LastStatusCode, r.status, r.class)
				}
				if r.want != storage.StatusDelivered && (a.Error == "" || d.LastError == "") {
					t.Errorf("failed attempt without an error: %+v / %q", a, d.LastError)
				}
				if rec != nil && rec.count() != 1 {
					t.Errorf("receiver hit %d times", rec.count())
				}
				if target.count() != 0 {
					t.Errorf("redirect followed: target hit %d times", target.count())
				}
				if r.want == storage.StatusPending {
					wait := d.NextAttemptAt.Sub(a.DispatchedAt)
					if wait < r.minWait || wait > r.maxWait {
						t.Errorf("next attempt %s after the first, want between %s and %s", wait, r.minWait, r.maxWait)
					}
				}
			})
		}
	})
}

// independentSignature recomputes the hookd scheme with nothing but the standard library, so a
// bug shared by the dispatcher and the signing package cannot hide.
func independentSignature(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// TestRetryLadder runs the whole ladder, shrunk, against a receiver that always answers 500:
// 1 + maxRetries + 6 attempts, then dead; the event keeps its id and occurredAt, every attempt
// is stamped, numbered and signed anew, and every attempt is recorded.
func TestRetryLadder(t *testing.T) {
	fast := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 60 * time.Millisecond}
	ladder := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond,
		10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}
	respBody := strings.Repeat("错", 3000) // 9000 bytes, 3 per rune: truncation must not split one
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{Retry: RetryPolicy{Fast: fast, Ladder: ladder, Jitter: 0}})
		for maxRetries := 0; maxRetries <= 3; maxRetries++ {
			t.Run(fmt.Sprint("maxRetries=", maxRetries), func(t *testing.T) {
				secret := fmt.Sprintf("whsec-ladder-%d", maxRetries)
				rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 500, respBody })
				tool := fmt.Sprint("ladder", maxRetries)
				h.add(Hook{HookName: "ladder", HookType: PostToolUse, ToolNameMatch: tool,
					DispatchConfig: DispatchConfig{URL: rec.srv.URL, MaxRetries: ptr(maxRetries), SigningSecret: &secret}})
				occurred := time.UnixMilli(1749300003000)
				id := h.observeOne(Event{HookType: PostToolUse, TraceID: "tr-ladder", OccurredAt: occurred,
					Context: &PostToolUseContext{ToolName: tool, Arguments: `{"a":1}`}})
				d := h.waitDelivery(id, 20*time.Second, "to die", func(d storage.Delivery) bool { return d.Status == storage.StatusDead })
				want := 1 + maxRetries + len(ladder)
				if d.Attempts != want || d.LastStatusCode != 500 {
					t.Fatalf("dead after %d attempts (last %d), want %d", d.Attempts, d.LastStatusCode, want)
				}
				reqs := rec.requests()
				if len(reqs) != want {
					t.Fatalf("receiver got %d requests, want %d", len(reqs), want)
				}
				schedule := append(append([]time.Duration(nil), fast[:maxRetries]...), ladder...)
				var prev Envelope
				for i, q := range reqs {
					var env Envelope
					if err := json.Unmarshal(q.body, &env); err != nil {
						t.Fatal(err)
					}
					if env.EventID != id || env.OccurredAt != occurred.UnixMilli() || env.DeliveryAttempt != i+1 {
						t.Errorf("attempt %d: eventId %s occurredAt %d deliveryAttempt %d", i+1, env.EventID, env.OccurredAt, env.DeliveryAttempt)
					}
					if i > 0 {
						if env.DispatchedAt < prev.DispatchedAt+schedule[i-1].Milliseconds() {
							t.Errorf("attempt %d dispatched %d ms after attempt %d, want at least %s",
								i+1, env.DispatchedAt-prev.DispatchedAt, i, schedule[i-1])
						}
					}
					prev = env
					ts, sig := q.header.Get("X-Webhook-Timestamp"), q.header.Get("X-Webhook-Signature")
					if ts != strconv.FormatInt(env.DispatchedAt, 10) {
						t.Errorf("attempt %d: X-Webhook-Timestamp %s, dispatchedAt %d", i+1, ts, env.DispatchedAt)
					}
					if err := signing.Verify(secret, ts, sig, q.body, 0, time.Now()); err != nil {
						t.Errorf("attempt %d: signing.Verify: %v", i+1, err)
					}
					if want := independentSignature(secret, ts, q.body); !hmac.Equal([]byte(sig), []byte(want)) {
						t.Errorf("attempt %d: signature %s, independent HMAC %s", i+1, sig, want)
					}
				}
				as := h.attempts(d.ID)
				if len(as) != want {
					t.Fatalf("%d attempts recorded, want %d", len(as), want)
				}
				for i, a := range as {
					var env Envelope
					json.Unmarshal(reqs[i].body, &env)
					if a.Attempt != i+1 || a.StatusCode != 500 || a.ErrorClass != "http_5xx" || a.LatencyMs < 0 ||
						a.DispatchedAt.UnixMilli() != env.DispatchedAt || a.Error == "" {
						t.Errorf("attempt record %d: %+v", i+1, a)
					}
					if len(a.ResponseBody) > 2048 || len(a.ResponseBody) < 2040 || !utf8.ValidString(a.ResponseBody) ||
						!strings.HasPrefix(respBody, a.ResponseBody) {
						t.Errorf("attempt record %d keeps %d bytes of the body; want a valid prefix of at most 2 KiB", i+1, len(a.ResponseBody))
					}
				}
			})
		}
	})
}

// TestRetryPolicyDelay pins the schedule of the document and its ±25 % jitter.
func TestRetryPolicyDelay(t *testing.T) {
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	ladder := []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute}
	for maxRetries := 0; maxRetries <= 3; maxRetries++ {
		want := append([]time.Duration{sec(1.5), sec(3), sec(6)}[:maxRetries], ladder...)
		exact := DefaultRetry
		exact.Jitter = 0
		for done := 1; done <= len(want); done++ {
			d, ok := exact.delay(done, maxRetries)
			if !ok || d != want[done-1] {
				t.Errorf("maxRetries %d, after attempt %d: %s %v, want %s", maxRetries, done, d, ok, want[done-1])
			}
			lo, hi := time.Duration(float64(want[done-1])*0.75), time.Duration(float64(want[done-1])*1.25)
			var seenLow, seenHigh bool
			for range 2000 {
				d, ok := DefaultRetry.delay(done, maxRetries)
				if !ok || d < lo || d > hi {
					t.Fatalf("maxRetries %d, after attempt %d: jittered %s outside [%s, %s]", maxRetries, done, d, lo, hi)
				}
				seenLow = seenLow || d < time.Duration(float64(want[done-1])*0.9)
				seenHigh = seenHigh || d > time.Duration(float64(want[done-1])*1.1)
			}
			if !seenLow || !seenHigh {
				t.Errorf("maxRetries %d, after attempt %d: 2000 draws never left ±10 %%: no jitter?", maxRetries, done)
			}
		}
		if _, ok := DefaultRetry.delay(len(want)+1, maxRetries); ok {
			t.Errorf("maxRetries %d: a retry after %d attempts, want the ladder spent", maxRetries, len(want)+1)
		}
	}
}
