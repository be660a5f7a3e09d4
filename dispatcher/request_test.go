package dispatcher

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookd/hookd/signing"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestRequestHeaders: what every request carries, and what only some do.
func TestRequestHeaders(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{Version: "1.2.3", Retry: RetryPolicy{Fast: []time.Duration{10 * time.Millisecond}, Ladder: []time.Duration{10 * time.Millisecond}}})
		ctx := context.Background()
		rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"allow"}` })
		secret := "whsec-hookd-test"
		plain := int64(1)
		signed := int64(2)
		h.add(Hook{HookName: "plain", HookType: PreScheduledTask, AgentID: &plain, DispatchConfig: DispatchConfig{URL: rec.srv.URL}})
		h.add(Hook{HookName: "signed", HookType: PreScheduledTask, AgentID: &signed,
			DispatchConfig: DispatchConfig{URL: rec.srv.URL, SigningSecret: &secret}})
		ev := func(agent *int64, trace string) Event {
			return Event{HookType: PreScheduledTask, AgentID: agent, TraceID: trace,
				Context: &PreScheduledTaskContext{TaskID: 9001, TaskName: "每日财报生成"}}
		}
		for _, c := range []struct {
			name   string
			agent  *int64
			trace  string
			signed bool
		}{
			{"no trace, no secret", &plain, "", false},
			{"trace, no secret", &plain, "req-1", false},
			{"no trace, secret", &signed, "", true},
			{"trace and secret", &signed, "req-2", true},
		} {
			t.Run(c.name, func(t *testing.T) {
				before := rec.count()
				if _, err := h.d.Intercept(ctx, ev(c.agent, c.trace)); err != nil {
					t.Fatal(err)
				}
				q := rec.requests()[before]
				hd := q.header
				if hd.Get("Content-Type") != "application/json" || hd.Get("User-Agent") != "hookd/1.2.3" {
					t.Errorf("Content-Type %q User-Agent %q", hd.Get("Content-Type"), hd.Get("User-Agent"))
				}
				if _, ok := hd["X-Request-Id"]; ok != (c.trace != "") || hd.Get("X-Request-Id") != c.trace {
					t.Errorf("X-Request-Id %q present %v, want %q", hd.Get("X-Request-Id"), ok, c.trace)
				}
				var env Envelope
				json.Unmarshal(q.body, &env)
				if (env.TraceID == nil) != (c.trace == "") {
					t.Errorf("envelope traceId %v for trace %q", env.TraceID, c.trace)
				}
				ts, sig := hd.Get("X-Webhook-Timestamp"), hd.Get("X-Webhook-Signature")
				if _, ok := hd["X-Webhook-Timestamp"]; ok != c.signed {
					t.Errorf("X-Webhook-Timestamp present %v, want %v", ok, c.signed)
				}
				if _, ok := hd["X-Webhook-Signature"]; ok != c.signed {
					t.Errorf("X-Webhook-Signature present %v, want %v", ok, c.signed)
				}
				if hd.Get(signing.HeaderStdSignature) != "" {
					t.Errorf("standard scheme headers on a hookd-scheme hook")
				}
				if !c.signed {
					return
				}
				ms, err := strconv.ParseInt(ts, 10, 64)
				if err != nil || ms != env.DispatchedAt || time.Since(time.UnixMilli(ms)).Abs() > time.Minute {
					t.Errorf("X-Webhook-Timestamp %q: want epoch ms equal to dispatchedAt %d", ts, env.DispatchedAt)
				}
				if err := signing.Verify(secret, ts, sig, q.body, 0, time.Now()); err != nil {
					t.Errorf("signing.Verify: %v", err)
				}
				if want := independentSignature(secret, ts, q.body); sig != want {
					t.Errorf("signature %s, independent HMAC %s", sig, want)
				}
				if signing.Verify("wrong", ts, sig, q.body, 0, time.Now()) == nil {
					t.Error("signature verifies with the wrong secret")
				}
			})
		}

		t.Run("standard webhooks scheme", func(t *testing.T) {
			std := signing.NewStandardSecret()
			srec := newRecorder(t, func(n int, _ *http.Request, _ []byte) (int, string) {
				if n == 1 {
					return 503, "" // one retry: the id stays, the signature is made anew
				}
				return 200, ""
			})
			h.add(Hook{HookName: "std", HookType: SessionStart,
				DispatchConfig: DispatchConfig{URL: srec.srv.URL, SigningSecret: &std, SignatureScheme: SchemeStandard}})
			id := h.observeOne(Event{HookType: SessionStart, Context: &SessionStartContext{NewSession: true}})
			h.waitDelivery(id, 10*time.Second, "delivered", func(d storage.Delivery) bool { return d.Status == storage.StatusDelivered })
			reqs := srec.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			for i, q := range reqs {
				hd := q.header
				var env Envelope
				json.Unmarshal(q.body, &env)
				if hd.Get(signing.HeaderStdID) != id || env.DeliveryAttempt != i+1 {
					t.Errorf("attempt %d: webhook-id %q, eventId %s", i+1, hd.Get(signing.HeaderStdID), id)
				}
				if secs := hd.Get(signing.HeaderStdTimestamp); secs != strconv.FormatInt(env.DispatchedAt/1000, 10) {
					t.Errorf("attempt %d: webhook-timestamp %s, dispatchedAt %d", i+1, secs, env.DispatchedAt)
				}
				if err := signing.VerifyStandard(std, hd.Get(signing.HeaderStdID), hd.Get(signing.HeaderStdTimestamp),
					hd.Get(signing.HeaderStdSignature), q.body, 0, time.Now()); err != nil {
					t.Errorf("attempt %d: VerifyStandard: %v", i+1, err)
				}
				if hd.Get("X-Webhook-Signature") != "" || hd.Get("X-Webhook-Timestamp") != "" {
					t.Errorf("attempt %d: hookd-scheme headers on a standard-scheme hook", i+1)
				}
			}
		})
	})
}

// TestAuthHeaders: each auth type puts its credential where the receiver expects it.
func TestAuthHeaders(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		rec := newRecorder(t, nil)
		basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
		cases := []struct {
			name string
			auth *Auth
			want map[string]string // header → value ("" = absent)
		}{
			{"none", &Auth{Type: "NONE"}, map[string]string{"Authorization": "", "X-API-Key": ""}},
			{"no auth object", nil, map[string]string{"Authorization": ""}},
			{"api key default header", &Auth{Type: "API_KEY", Credential: "k-1"}, map[string]string{"X-API-Key": "k-1", "Authorization": ""}},
			{"api key custom header", &Auth{Type: "api_key", Header: "X-Tenant-Key", Credential: "k-2"}, map[string]string{"X-Tenant-Key": "k-2", "X-API-Key": ""}},
			{"bearer", &Auth{Type: "BEARER", Credential: "tok"}, map[string]string{"Authorization": "Bearer tok"}},
			{"bearer custom prefix", &Auth{Type: "BEARER", Credential: "tok", Prefix: "Token"}, map[string]string{"Authorization": "Token tok"}},
			{"basic from username and password", &Auth{Type: "BASIC", Username: "user", Password: "p@ss:word"}, map[string]string{"Authorization": basic("user", "p@ss:word")}},
			{"basic pre-encoded", &Auth{Type: "BASIC", Credential: base64.StdEncoding.EncodeToString([]byte("u:p"))}, map[string]string{"Authorization": basic("u", "p")}},
			{"custom headers", &Auth{Type: "CUSTOM", Headers: map[string]string{"X-A": "1", "X-Tenant": "acme"}}, map[string]string{"X-A": "1", "X-Tenant": "acme", "Authorization": ""}},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				agent := int64(i + 1)
				h.add(Hook{HookName: c.name, HookType: PreToolUse, AgentID: &agent,
					DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: c.auth, FailureMode: FailClosed}})
				before := rec.count()
				dec, err := h.d.Intercept(context.Background(), Event{HookType: PreToolUse, AgentID: &agent,
					Context: &PreToolUseContext{ToolName: "t", Arguments: "{}"}})
				if err != nil || dec.Decision != Allow {
					t.Fatalf("%+v %v", dec, err)
				}
				hd := rec.requests()[before].header
				for k, v := range c.want {
					if got := hd.Get(k); got != v {
						t.Errorf("%s: %q, want %q", k, got, v)
					}
				}
			})
		}
	})
}

// tokenServer hands out tok-1, tok-2, … in {"data":{"token":…,"expiresIn":…}}.
type tokenServer struct {
	*recorder
	fetches   atomic.Int64
	expiresIn string // JSON number
	status    int
}

func newTokenServer(t *testing.T, expiresIn string, status int) *tokenServer {
	ts := &tokenServer{expiresIn: expiresIn, status: status}
	ts.recorder = newRawRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request, body []byte) {
		if ts.status != 200 {
			w.WriteHeader(ts.status)
			return
		}
		n := ts.fetches.Add(1)
		fmt.Fprintf(w, `{"code":0,"data":{"token":"tok-%d","expiresIn":%s}}`, n, ts.expiresIn)
	})
	return ts
}

func tokenAuth(ts *tokenServer) *Auth {
	return &Auth{Type: AuthCustomHTTPToken, TokenFetchConfig: &TokenFetch{URL: ts.srv.URL + "/oauth/token", Method: "POST",
		Headers: map[string]string{"X-Client-Id": "hookd"}, Body: `{"grant_type":"client_credentials"}`,
		TokenPath: "data.token", ExpiresInPath: "data.expiresIn"}}
}

// TestCustomHTTPToken: the token is fetched, cached until it expires, injected, and fetched
// anew once when the receiver says 401.
func TestCustomHTTPToken(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		ctx := context.Background()
		agent := int64(0)
		intercept := func(a *int64) Decision {
			t.Helper()
			dec, err := h.d.Intercept(ctx, Event{HookType: PreToolUse, AgentID: a, Context: &PreToolUseContext{ToolName: "t", Arguments: "{}"}})
			if err != nil {
				t.Fatal(err)
			}
			return dec
		}
		bearerOf := func(rec *recorder) []string {
			var out []string
			for _, q := range rec.requests() {
				out = append(out, q.header.Get("Authorization"))
			}
			return out
		}

		t.Run("fetched once and cached", func(t *testing.T) {
			ts := newTokenServer(t, "3600", 200)
			rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"allow"}` })
			agent++
			a := agent
			h.add(Hook{HookName: "token", HookType: PreToolUse, AgentID: &a,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: tokenAuth(ts), FailureMode: FailClosed}})
			for range 2 {
				if dec := intercept(&a); dec.Decision != Allow {
					t.Fatalf("%+v", dec)
				}
			}
			if n := ts.fetches.Load(); n != 1 {
				t.Fatalf("%d token fetches for 2 calls, want 1", n)
			}
			if got := bearerOf(rec); strings.Join(got, ",") != "Bearer tok-1,Bearer tok-1" {
				t.Fatalf("Authorization headers %v", got)
			}
			tq := ts.requests()[0]
			if tq.header.Get("X-Client-Id") != "hookd" || string(tq.body) != `{"grant_type":"client_credentials"}` ||
				tq.header.Get("Content-Type") != "application/json" {
				t.Errorf("token request: %v %s", tq.header, tq.body)
			}
		})

		t.Run("fetched again when expired", func(t *testing.T) {
			ts := newTokenServer(t, "0.2", 200) // seconds
			rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 200, `{"decision":"allow"}` })
			agent++
			a := agent
			h.add(Hook{HookName: "short token", HookType: PreToolUse, AgentID: &a,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: tokenAuth(ts), FailureMode: FailClosed}})
			intercept(&a)
			time.Sleep(300 * time.Millisecond) // the token's lifetime, not a guess at machine speed
			intercept(&a)
			if n := ts.fetches.Load(); n != 2 {
				t.Fatalf("%d token fetches, want 2 (the first token expired)", n)
			}
			if got := bearerOf(rec); len(got) != 2 || got[1] != "Bearer tok-2" {
				t.Fatalf("Authorization headers %v", got)
			}
		})

		t.Run("401 fetches anew and retries once", func(t *testing.T) {
			ts := newTokenServer(t, "3600", 200)
			rec := newRecorder(t, func(_ int, r *http.Request, _ []byte) (int, string) {
				if r.Header.Get("Authorization") == "Bearer tok-1" {
					return 401, `{"error":"revoked"}`
				}
				return 200, `{"decision":"deny","reason":"checked"}`
			})
			agent++
			a := agent
			h.add(Hook{HookName: "revoked", HookType: PreToolUse, AgentID: &a,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: tokenAuth(ts)}})
			dec := intercept(&a)
			if dec.Decision != Deny || dec.Reason != "checked" {
				t.Fatalf("%+v: want the receiver's answer after the retry", dec)
			}
			if got := bearerOf(rec); strings.Join(got, ",") != "Bearer tok-1,Bearer tok-2" || ts.fetches.Load() != 2 {
				t.Fatalf("Authorization headers %v after %d fetches", got, ts.fetches.Load())
			}
			if log := h.decisions(dec.DecisionID, 1)[0]; log.FromFailureMode || log.StatusCode != 200 {
				t.Errorf("log %+v", log)
			}
		})

		t.Run("401 twice is a failure, not a loop", func(t *testing.T) {
			ts := newTokenServer(t, "3600", 200)
			rec := newRecorder(t, func(int, *http.Request, []byte) (int, string) { return 401, "" })
			agent++
			a := agent
			h.add(Hook{HookName: "always 401", HookType: PreToolUse, AgentID: &a,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: tokenAuth(ts), FailureMode: FailClosed}})
			if dec := intercept(&a); dec.Decision != Deny {
				t.Fatalf("%+v", dec)
			}
			if rec.count() != 2 || ts.fetches.Load() != 2 {
				t.Fatalf("%d receiver calls, %d fetches; want 2 and 2", rec.count(), ts.fetches.Load())
			}
		})

		// noToken: a hook whose token ts does not give falls to its failureMode (DENY) without a
		// request, the log's error holding cause.
		noToken := func(t *testing.T, ts *tokenServer, cause string) {
			t.Helper()
			rec := newRecorder(t, nil)
			agent++
			a := agent
			h.add(Hook{HookName: "no token", HookType: PreToolUse, AgentID: &a,
				DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: tokenAuth(ts), FailureMode: FailClosed}})
			dec := intercept(&a)
			if dec.Decision != Deny || rec.count() != 0 {
				t.Fatalf("%+v, receiver called %d times; want failureMode and no request", dec, rec.count())
			}
			if log := h.decisions(dec.DecisionID, 1)[0]; !log.FromFailureMode || !strings.Contains(log.Error, cause) {
				t.Errorf("log %+v", log)
			}
		}

		t.Run("token endpoint down", func(t *testing.T) {
			noToken(t, newTokenServer(t, "3600", 403), "token")
		})

		// A path that finds no lifetime would keep the token for good.
		t.Run("expiresInPath that finds no lifetime", func(t *testing.T) {
			for _, expiresIn := range []string{"null", `"soon"`, "0", "-60"} {
				t.Run(expiresIn, func(t *testing.T) { noToken(t, newTokenServer(t, expiresIn, 200), "expiresInPath") })
			}
		})

		t.Run("observational delivery with a token", func(t *testing.T) {
			ts := newTokenServer(t, "3600", 200)
			rec := newRecorder(t, func(_ int, r *http.Request, _ []byte) (int, string) {
				if r.Header.Get("Authorization") == "Bearer tok-1" {
					return 401, ""
				}
				return 204, ""
			})
			h.add(Hook{HookName: "obs token", HookType: AgentCompletion, DispatchConfig: DispatchConfig{URL: rec.srv.URL, Auth: tokenAuth(ts)}})
			id := h.observeOne(Event{HookType: AgentCompletion, Context: &AgentCompletionContext{Succeeded: true}})
			d := h.waitDelivery(id, 10*time.Second, "delivered", func(d storage.Delivery) bool {
				return d.Status != storage.StatusPending && d.Status != storage.StatusDelivering
			})
			if d.Status != storage.StatusDelivered || d.Attempts != 1 || rec.count() != 2 {
				t.Fatalf("%s after %d attempts, %d requests; want delivered after 1 attempt of 2 requests", d.Status, d.Attempts, rec.count())
			}
		})
	})
}

// bigAnswer writes head, pads it with spaces to 1 MiB, then waits for the client to hang up
// before streaming the rest of 10 MiB: a client that reads everything would wait for its timeout.
func bigAnswer(rec **recorder, status int, head string) func(int, http.ResponseWriter, *http.Request, []byte) {
	return func(_ int, w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		pad := bytes.Repeat([]byte(" "), 32<<10)
		written, _ := io.WriteString(w, head)
		for written < 1<<20 {
			n, err := w.Write(pad)
			if err != nil {
				return
			}
			written += n
		}
		http.NewResponseController(w).Flush()
		(*rec).block(r, 10*time.Second)
		for written < 10<<20 {
			n, err := w.Write(pad)
			if err != nil {
				return
			}
			written += n
		}
	}
}

// TestLargeResponse: a response body is read up to 64 KiB and no further, and an attempt
// keeps at most 2 KiB of it.
func TestLargeResponse(t *testing.T) {
	storagetest.Each(t, func(t *testing.T, db *storage.DB) {
		h := newHarness(t, db, Settings{})
		var irec, orec *recorder
		irec = newRawRecorder(t, bigAnswer(&irec, 200, `{"decision":"deny","reason":"big"}`))
		orec = newRawRecorder(t, bigAnswer(&orec, 200, `{"ok":true}`))
		h.add(Hook{HookName: "big", HookType: UserMessage, DispatchConfig: DispatchConfig{URL: irec.srv.URL, TimeoutMs: 3000}})
		h.add(Hook{HookName: "big audit", HookType: PostLLMCall, DispatchConfig: DispatchConfig{URL: orec.srv.URL, TimeoutMs: 3000}})

		start := time.Now()
		dec, err := h.d.Intercept(context.Background(), Event{HookType: UserMessage, Context: &UserMessageContext{UserInput: "x"}})
		el := time.Since(start)
		if err != nil || dec.Decision != Deny || dec.Reason != "big" {
			t.Fatalf("%+v %v: want the deny read from the first 64 KiB", dec, err)
		}
		if el > time.Second {
			t.Errorf("interceptive call took %s: the body was read past 64 KiB", el)
		}
		if log := h.decisions(dec.DecisionID, 1)[0]; log.FromFailureMode {
			t.Errorf("log %+v", log)
		}

		id := h.observeOne(Event{HookType: PostLLMCall, Context: &PostLLMCallContext{Model: "m"}})
		d := h.waitDelivery(id, 10*time.Second, "settled", func(d storage.Delivery) bool { return d.Attempts > 0 })
		if d.Status != storage.StatusDelivered || d.Attempts != 1 {
			t.Fatalf("%s after %d attempts", d.Status, d.Attempts)
		}
		a := h.attempts(d.ID)[0]
		if a.LatencyMs > 1000 {
			t.Errorf("attempt took %d ms: the body was read past 64 KiB", a.LatencyMs)
		}
		if len(a.ResponseBody) > 2048 || !strings.HasPrefix(a.ResponseBody, `{"ok":true}`) {
			t.Errorf("attempt keeps %d bytes of the response, want at most 2 KiB", len(a.ResponseBody))
		}
	})
}
