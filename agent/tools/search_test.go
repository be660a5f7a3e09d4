package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// searxng is a search backend answering like SearXNG's format=json.
func searxng(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case q.Get("format") != "json" || q.Get("language") != "zh-CN":
			http.Error(w, "bad format or language", http.StatusBadRequest)
			return
		case q.Get("q") == "down":
			http.Error(w, "engine down", http.StatusBadGateway)
			return
		case q.Get("q") == "html":
			fmt.Fprint(w, "<html>not json</html>")
			return
		}
		var results []map[string]string
		for i := 1; i <= 8; i++ {
			results = append(results, map[string]string{"title": fmt.Sprintf(" %s %d ", q.Get("q"), i),
				"url": fmt.Sprintf("https://example.com/%d", i), "content": "snippet " + q.Get("q"), "engine": "duckduckgo"})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"query": q.Get("q"), "number_of_results": len(results), "results": results})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestWebSearch(t *testing.T) {
	srv := searxng(t)
	s, err := NewWebSearch(srv.URL+"/search?language=zh-CN", &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args string) Result {
		t.Helper()
		res, err := s.Run(context.Background(), Env{}, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(`{"query":"季度 报告","limit":2}`)
	hits, ok := ParseSearchResults(res.Text)
	if res.IsError || !ok {
		t.Fatalf("result %+v", res)
	}
	want := []SearchResult{{Title: "季度 报告 1", URL: "https://example.com/1", Snippet: "snippet 季度 报告"},
		{Title: "季度 报告 2", URL: "https://example.com/2", Snippet: "snippet 季度 报告"}}
	if fmt.Sprint(hits) != fmt.Sprint(want) {
		t.Fatalf("hits %v, want %v", hits, want)
	}
	if hits, _ := ParseSearchResults(run(`{"query":"x"}`).Text); len(hits) != DefaultSearchResults {
		t.Fatalf("default limit: %d hits", len(hits))
	}
	for args, msg := range map[string]string{
		`{"query":"  "}`:           "query is required",
		`{"query":"x","limit":21}`: "limit 21 must be between 1 and 20",
		`{"q":"x"}`:                `arguments.q: unknown field`,
		`{"query":"down"}`:         "the search backend answered 502 Bad Gateway",
		`{"query":"html"}`:         "not a JSON object with results",
	} {
		if res := run(args); !res.IsError || !strings.Contains(res.Text, msg) {
			t.Errorf("%s: %+v, want an error with %q", args, res, msg)
		}
		if _, ok := ParseSearchResults(run(args).Text); ok {
			t.Errorf("%s: an error output parses as results", args)
		}
	}
}

// The backend goes through the SSRF guard like http_request: a loopback backend is refused by
// the default policy.
func TestWebSearchGuarded(t *testing.T) {
	s, err := NewWebSearch(searxng(t).URL+"/search?language=zh-CN", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background(), Env{}, json.RawMessage(`{"query":"x"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Text, "search refused") {
		t.Fatalf("%+v %v", res, err)
	}
	for _, bad := range []string{"", "ftp://x", "/search", "http://"} {
		if _, err := NewWebSearch(bad, nil); err == nil {
			t.Errorf("url %q accepted", bad)
		}
	}
}

// TestWebSearchKeepsItsKey: a search backend that takes its key in the URL's query never has it
// shown to the model or the chat: not when the guard refuses it, the backend is down or slow, it
// redirects somewhere refused, or answers an error; nor in the startup error of a bad URL.
func TestWebSearchKeepsItsKey(t *testing.T) {
	const key = "sk-search-0f9e8d7c"
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("q") {
		case "redirect":
			http.Redirect(w, r, "http://10.0.0.1/search?key="+key, http.StatusFound)
		case "slow":
			<-r.Context().Done()
		default:
			http.Error(w, "bad key "+r.URL.Query().Get("key"), http.StatusForbidden)
		}
	}))
	t.Cleanup(refuse.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	run := func(backend string, client *http.Client, query string) string {
		t.Helper()
		s, err := NewWebSearch(backend+"/search?key="+key, client)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(context.Background(), Env{}, json.RawMessage(`{"query":"`+query+`"}`))
		if err != nil || !res.IsError {
			t.Fatalf("%s %s: %+v %v", backend, query, res, err)
		}
		return res.Text
	}
	open := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host == "10.0.0.1" {
			return fmt.Errorf("redirect to %s refused", req.URL)
		}
		return nil
	}}
	texts := []string{
		run(refuse.URL, nil, "x"),                                             // the guard refuses loopback
		run(closed.URL, &http.Client{}, "x"),                                  // connection refused
		run(refuse.URL, open, "redirect"),                                     // a redirect the client refuses, quoting it
		run(refuse.URL, open, "forbidden"),                                    // an error answer
		run(refuse.URL, &http.Client{Timeout: 50 * time.Millisecond}, "slow"), // a timeout
	}
	if _, err := NewWebSearch("htp://search.example/?key="+key, nil); err == nil {
		t.Fatal("a bad scheme was accepted")
	} else {
		texts = append(texts, err.Error())
	}
	for _, text := range texts {
		if strings.Contains(text, key) {
			t.Errorf("the key is shown: %s", text)
		}
	}
}
