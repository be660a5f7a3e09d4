package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/api/wire"
	"github.com/hookd/hookd/storage/storagetest"
)

// consoleStreamServer serves the whole API with an admin token and a reviewer key, its console
// sessions lasting ttl.
func consoleStreamServer(t *testing.T, ttl time.Duration) *httptest.Server {
	t.Helper()
	env := agenttest.New(t, storagetest.SQLite(t), agenttest.Options{Script: askScript})
	keys := wire.NewKeys([]wire.APIKey{{Key: keyAlice, UserID: "alice", PrincipalID: 1001},
		{Key: keyRev, UserID: "rita", PrincipalID: 9001, Role: wire.RoleReviewer, Reviews: []string{"alice"}}})
	srv := httptest.NewServer(api.New(api.Deps{DB: env.DB, Hooks: env.Hooks, Dispatcher: env.Dispatcher,
		AdminTokens: []string{authAdmin}, Log: agenttest.Quiet(), Runtime: env.Runtime, Keys: keys,
		Workspaces: env.Workspaces, ConsoleTTL: ttl}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// consoleSession signs in with credential and returns the cookie header and the CSRF token.
func consoleSession(t *testing.T, srv *httptest.Server, credential string) (cookie, csrf string) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/console/session", strings.NewReader(`{"credential":"`+credential+`"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var w struct{ Data struct{ CSRFToken string } }
	json.NewDecoder(resp.Body).Decode(&w)
	for _, c := range resp.Cookies() {
		if c.Name == "hookd_console" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if resp.StatusCode != http.StatusCreated || cookie == "" {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	return cookie, w.Data.CSRFToken
}

// openStream opens an SSE stream of the admin API with a console cookie; the channel is closed
// when the daemon ends the stream.
func openStream(t *testing.T, srv *httptest.Server, path, cookie string) <-chan struct{} {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("Cookie", cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()
	return ended
}

// waitEnded fails unless the stream ends: its end is what the session's end causes, not a timer of
// the test (the deadline only keeps a broken daemon from hanging the run).
func waitEnded(t *testing.T, what string, ended <-chan struct{}) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatalf("%s is still open after its session ended", what)
	}
}

// TestConsoleStreamsEndWithTheirSession: a console stream (the decision tail, the approvals
// inbox) lasts no longer than the session that opened it. Signing out ends that session's streams
// and not another's; a session's expiry ends its streams, and reconnecting is refused.
func TestConsoleStreamsEndWithTheirSession(t *testing.T) {
	t.Run("sign-out", func(t *testing.T) {
		srv := consoleStreamServer(t, 0)
		admA, csrfA := consoleSession(t, srv, authAdmin)
		admB, _ := consoleSession(t, srv, authAdmin)
		rev, csrfR := consoleSession(t, srv, keyRev)
		decisionsA := openStream(t, srv, "/api/decisions/stream", admA)
		approvalsA := openStream(t, srv, "/api/approvals/stream", admA)
		inboxR := openStream(t, srv, "/api/approvals/stream", rev)
		decisionsB := openStream(t, srv, "/api/decisions/stream", admB)

		for _, s := range []struct{ cookie, csrf string }{{admA, csrfA}, {rev, csrfR}} {
			if st, body := call(t, srv, "DELETE", "/console/session", "", "", "Cookie: "+s.cookie, "X-CSRF-Token: "+s.csrf); st != 200 {
				t.Fatalf("sign-out: %d %s", st, body)
			}
		}
		waitEnded(t, "the signed-out admin's decision tail", decisionsA)
		waitEnded(t, "the signed-out admin's approvals stream", approvalsA)
		waitEnded(t, "the signed-out reviewer's inbox", inboxR)
		select {
		case <-decisionsB:
			t.Fatal("another session's stream ended with the sign-out")
		default:
		}
		if st, _ := call(t, srv, "GET", "/api/decisions/stream", "", "", "Cookie: "+admA); st != http.StatusUnauthorized {
			t.Fatalf("reconnecting after the sign-out: %d, want 401", st)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		srv := consoleStreamServer(t, 2*time.Second)
		adm, _ := consoleSession(t, srv, authAdmin)
		rev, _ := consoleSession(t, srv, keyRev)
		decisions := openStream(t, srv, "/api/decisions/stream", adm)
		inbox := openStream(t, srv, "/api/approvals/stream", rev)
		waitEnded(t, "the expired admin's decision tail", decisions)
		waitEnded(t, "the expired reviewer's inbox", inbox)
		if st, _ := call(t, srv, "GET", "/api/approvals/stream", "", "", "Cookie: "+rev); st != http.StatusUnauthorized {
			t.Fatalf("reconnecting after the expiry: %d, want 401", st)
		}
	})
}

// TestConsoleCookieSecureOverHTTPS: the session cookie is Secure when the browser came over
// HTTPS, which behind a TLS-terminating proxy only the proxy's header says; the cookie that
// clears it on sign-out likewise.
func TestConsoleCookieSecureOverHTTPS(t *testing.T) {
	srv := consoleStreamServer(t, 0)
	for _, c := range []struct {
		header string
		secure bool
	}{
		{"", false},
		{"X-Forwarded-Proto: http", false},
		{"X-Forwarded-Proto: https", true},
		{"X-Forwarded-Proto: HTTPS, http", true},
		{`Forwarded: for=192.0.2.60;proto=https;by=203.0.113.43`, true},
		{`Forwarded: proto="https"`, true},
		{`Forwarded: for=192.0.2.60;proto=http`, false},
	} {
		cookieOf := func(resp *http.Response) *http.Cookie {
			for _, ck := range resp.Cookies() {
				if ck.Name == "hookd_console" {
					return ck
				}
			}
			t.Fatalf("%q: no session cookie in %v", c.header, resp.Header)
			return nil
		}
		send := func(method, body, cookie, csrf string) *http.Response {
			req, _ := http.NewRequest(method, srv.URL+"/console/session", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if k, v, ok := strings.Cut(c.header, ": "); ok {
				req.Header.Set(k, v)
			}
			if cookie != "" {
				req.Header.Set("Cookie", cookie)
				req.Header.Set("X-CSRF-Token", csrf)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var w struct{ Data struct{ CSRFToken string } }
			json.NewDecoder(resp.Body).Decode(&w)
			resp.Header.Set("X-Test-CSRF", w.Data.CSRFToken)
			return resp
		}
		in := send("POST", `{"credential":"`+authAdmin+`"}`, "", "")
		ck := cookieOf(in)
		if in.StatusCode != http.StatusCreated || ck.Secure != c.secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("%q: sign-in %d, cookie Secure=%v HttpOnly=%v SameSite=%v, want Secure=%v", c.header, in.StatusCode,
				ck.Secure, ck.HttpOnly, ck.SameSite, c.secure)
		}
		out := send("DELETE", "", ck.Name+"="+ck.Value, in.Header.Get("X-Test-CSRF"))
		if cleared := cookieOf(out); out.StatusCode != http.StatusOK || cleared.Secure != c.secure || cleared.MaxAge >= 0 {
			t.Errorf("%q: sign-out %d, cookie Secure=%v MaxAge=%d", c.header, out.StatusCode, cleared.Secure, cleared.MaxAge)
		}
	}
}

// A page of another site cannot sign a browser in: its form can post text/plain shaped as JSON,
// which sign-in refuses without a session cookie too (else the browser would act in the page's
// reviewer session).
func TestConsoleSignInTakesJSONOnly(t *testing.T) {
	srv := consoleStreamServer(t, 0)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
		req, _ := http.NewRequest("POST", srv.URL+"/console/session", strings.NewReader(`{"credential":"`+authAdmin+`","x":"="}`))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Origin", "https://elsewhere.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || len(resp.Cookies()) != 0 {
			t.Errorf("%q: %d, cookies %v; want 415 and no session", ct, resp.StatusCode, resp.Cookies())
		}
	}
}
