package tools

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookd/hookd/dispatcher/netguard"
)

func testServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var loops atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "hello")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s X-Token=%s UA=%s\n%s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Token"), r.UserAgent(), body)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such thing", http.StatusNotFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 300<<10))
	})
	mux.HandleFunc("/pic.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			fmt.Fprint(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		loops.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &loops
}

func TestHTTPRequest(t *testing.T) {
	srv, loops := testServer(t)
	h := NewHTTPRequest(&http.Client{Transport: &http.Transport{}})
	env := Env{}

	res := run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/hello"}))
	if res.IsError || !strings.HasPrefix(res.Text, "HTTP/1.1 200 OK\nContent-Type: text/plain; charset=utf-8\nContent-Length: 5\n\nhello") {
		t.Fatalf("GET: %+v", res)
	}

	res = run(t, h, env, argsJSON(t, map[string]any{
		"url": srv.URL + "/echo?q=1", "method": "post", "headers": map[string]string{"X-Token": "t0k"}, "body": "payload",
	}))
	if res.IsError || !strings.Contains(res.Text, "201 Created") || !strings.HasSuffix(res.Text, "\n\nPOST /echo?q=1 X-Token=t0k UA=hookd-agent\npayload") {
		t.Fatalf("POST: %+v", res)
	}

	res = run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/hello", "method": "HEAD"}))
	if res.IsError || !strings.HasPrefix(res.Text, "HTTP/1.1 200 OK") || strings.Contains(res.Text, "hello") {
		t.Fatalf("HEAD: %+v", res)
	}

	res = run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/missing"}))
	if !res.IsError || !strings.HasPrefix(res.Text, "HTTP/1.1 404 Not Found") || !strings.Contains(res.Text, "no such thing") {
		t.Fatalf("404: %+v", res)
	}

	res = run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/big"}))
	_, body, _ := strings.Cut(res.Text, "\n\n")
	if res.IsError || !strings.HasSuffix(body, "\n[body truncated: the first 256.0 KiB are shown]") ||
		strings.Count(body, "x") != MaxResponseBytes {
		t.Fatalf("big: %d bytes, ends %q", len(res.Text), res.Text[len(res.Text)-80:])
	}

	res = run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/pic.png"}))
	if res.IsError || len(res.Data) != 1 || res.Data[0].MediaType != "image/png" || res.Data[0].Name != "pic.png" ||
		!bytes.Equal(res.Data[0].Bytes, png) {
		t.Fatalf("image: %+v", res)
	}

	res = run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/hop/5"}))
	if res.IsError || !strings.Contains(res.Text, "[followed 5 redirect(s) to "+srv.URL+"/hop/0]") || !strings.HasSuffix(res.Text, "arrived") {
		t.Fatalf("5 redirects: %+v", res)
	}
	res = run(t, h, env, argsJSON(t, map[string]any{"url": srv.URL + "/loop"}))
	if !strings.Contains(res.Text, "[stopped after 5 redirects") || !strings.Contains(res.Text, "302 Found") ||
		!strings.Contains(res.Text, "Location: /loop") || loops.Load() != MaxRedirects+1 {
		t.Fatalf("redirect loop (%d requests): %+v", loops.Load(), res)
	}

	for _, c := range []struct{ args, msg string }{
		{`{}`, "url is required"},
		{`{"url":"ftp://example.com/x"}`, "must be an absolute http:// or https:// URL"},
		{`{"url":"/relative"}`, "must be an absolute http:// or https:// URL"},
		{`{"url":"http://"}`, "has no host"},
		{`{"url":"http://example.com","method":"TRACE"}`, `method "TRACE" is not supported`},
		{`{"url":"http://example.com","headers":{"a":1}}`, "invalid arguments for http_request"},
		{`{"url":"http://127.0.0.1:1/"}`, "request failed"},
	} {
		res := run(t, h, env, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.msg) {
			t.Errorf("%s: %+v, want an error saying %q", c.args, res, c.msg)
		}
	}
}

// Through the SSRF guard's transport a loopback URL is refused.
func TestHTTPRequestGuarded(t *testing.T) {
	srv, _ := testServer(t)
	guarded := NewHTTPRequest(&http.Client{Transport: netguard.New(netguard.Policy{}).Transport()})
	res := run(t, guarded, Env{}, argsJSON(t, map[string]any{"url": srv.URL + "/hello"}))
	if !res.IsError || !strings.Contains(res.Text, "request refused") || !strings.Contains(res.Text, "127.0.0.1 is loopback") {
		t.Fatalf("loopback through the guard: %+v", res)
	}
	// The default (nil client) is guarded too.
	res = run(t, NewHTTPRequest(nil), Env{}, argsJSON(t, map[string]any{"url": srv.URL + "/hello"}))
	if !res.IsError || !strings.Contains(res.Text, "request refused") {
		t.Fatalf("loopback through the default client: %+v", res)
	}
}
