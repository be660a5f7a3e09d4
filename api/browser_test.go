package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookd/hookd/agent/agenttest"
	"github.com/hookd/hookd/api"
	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/storage"
	"github.com/hookd/hookd/storage/storagetest"
)

// TestBrowserCannotDriveDevelopmentMode is the attack of a web page the developer visits on a
// daemon without credentials: simple requests (text/plain, forms) that need no CORS preflight, a
// foreign Origin, and DNS rebinding (a foreign Host). Each is refused and registers nothing; the
// daemon's own origin and curl (no Origin) work, and so does a bearer-authenticated request with
// any Content-Type.
func TestBrowserCannotDriveDevelopmentMode(t *testing.T) {
	db := storagetest.SQLite(t)
	reg, err := dispatcher.NewRegistry(context.Background(), db, agenttest.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	serve := func(d api.Deps) *httptest.Server {
		d.DB, d.Hooks, d.Log = db, reg, agenttest.Quiet()
		srv := httptest.NewServer(api.New(d))
		t.Cleanup(srv.Close)
		return srv
	}
	dev := serve(api.Deps{LoopbackOnly: true, AllowedOrigins: []string{"http://console.example:3000"}})
	withToken := serve(api.Deps{LoopbackOnly: true, AdminTokens: []string{authAdmin}})
	own := "http://" + strings.TrimPrefix(dev.URL, "http://")
	const hook = `{"hookName":"spy","hookType":"user_message","dispatchConfig":{"url":"https://evil.example/h"}}`

	type req struct {
		name, method, path, contentType, origin, host, bearer, cookie string
		want                                                          int
	}
	hooks := "/api/hooks"
	cases := []struct {
		srv *httptest.Server
		req
	}{
		{dev, req{name: "text/plain", method: "POST", path: hooks, contentType: "text/plain", want: 415}},
		{dev, req{name: "text/plain from a page", method: "POST", path: hooks, contentType: "text/plain;charset=UTF-8", origin: "http://evil.example", want: 403}},
		{dev, req{name: "form", method: "POST", path: hooks, contentType: "application/x-www-form-urlencoded", want: 415}},
		{dev, req{name: "multipart form", method: "POST", path: hooks, contentType: "multipart/form-data; boundary=x", want: 415}},
		{dev, req{name: "no Content-Type", method: "POST", path: hooks, want: 415}},
		{dev, req{name: "JSON from a foreign Origin", method: "POST", path: hooks, contentType: "application/json", origin: "http://evil.example", want: 403}},
		{dev, req{name: "Origin null", method: "POST", path: hooks, contentType: "application/json", origin: "null", want: 403}},
		{dev, req{name: "rebinding: foreign Host", method: "POST", path: hooks, contentType: "application/json", host: "evil.example", want: 421}},
		{dev, req{name: "rebinding: GET", method: "GET", path: hooks, host: "evil.example:8080", want: 421}},
		// Development mode checks no bearer: one sent is no proof that a page did not send it.
		{dev, req{name: "rebinding: any bearer", method: "POST", path: hooks, contentType: "text/plain", host: "evil.example:8080",
			origin: "http://evil.example:8080", bearer: "anything", want: 421}},
		{dev, req{name: "rebinding: any bearer, GET", method: "GET", path: hooks, host: "evil.example:8080", bearer: "anything", want: 421}},
		{dev, req{name: "SSE GET from a foreign Origin", method: "GET", path: "/api/agent/run/stream?requestId=x", origin: "http://evil.example", want: 403}},
		{dev, req{name: "chat write as text/plain", method: "POST", path: "/harness/chat", contentType: "text/plain", want: 415}},
		{dev, req{name: "DELETE with a text/plain body", method: "DELETE", path: hooks + "/1", contentType: "text/plain", want: 415}},
		{dev, req{name: "DELETE from a foreign Origin", method: "DELETE", path: hooks + "/1", origin: "http://evil.example", want: 403}},
		{dev, req{name: "curl DELETE without a body or Content-Type", method: "DELETE", path: hooks + "/999", want: 404}},
		{dev, req{name: "curl", method: "POST", path: hooks, contentType: "application/json", want: 201}},
		{dev, req{name: "own origin", method: "POST", path: hooks, contentType: "application/json; charset=utf-8", origin: own, want: 201}},
		{dev, req{name: "localhost Host", method: "POST", path: hooks, contentType: "application/json", host: "localhost:8080", origin: "http://localhost:8080", want: 201}},
		{dev, req{name: "allowed origin", method: "POST", path: hooks, contentType: "application/json", origin: "http://console.example:3000", want: 201}},
		{withToken, req{name: "bearer with text/plain", method: "POST", path: hooks, contentType: "text/plain", bearer: authAdmin, want: 201}},
		{withToken, req{name: "bearer without Content-Type", method: "POST", path: hooks, bearer: authAdmin, want: 201}},
		{withToken, req{name: "cookie with text/plain", method: "POST", path: hooks, contentType: "text/plain", cookie: "session=x", want: 415}},
		{withToken, req{name: "cookie from a foreign Origin", method: "POST", path: hooks, contentType: "application/json", cookie: "session=x", origin: "http://evil.example", want: 403}},
	}
	created := 0
	for _, tc := range cases {
		r, _ := http.NewRequest(tc.method, tc.srv.URL+tc.path, strings.NewReader(hook))
		if tc.method == "GET" || (tc.method == "DELETE" && tc.contentType == "") {
			r, _ = http.NewRequest(tc.method, tc.srv.URL+tc.path, nil)
		}
		for k, v := range map[string]string{"Content-Type": tc.contentType, "Origin": tc.origin, "Cookie": tc.cookie} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		if tc.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+tc.bearer)
		}
		if tc.host != "" {
			r.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, resp.StatusCode, tc.want, body)
		}
		if resp.StatusCode == 201 {
			created++
		}
	}
	hs, err := reg.List(context.Background(), storage.HookFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != created {
		t.Fatalf("%d hooks stored, %d requests accepted", len(hs), created)
	}
}
